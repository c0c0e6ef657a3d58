"""Finding (torch 2.4 to 2.9; fixed in 2.10, measured on every release to 2.15,
docs/torch-versions.md): `F.pad` in constant mode raises "The input size 0, plus negative padding 0 and 0 resulted
in a negative output size" for a tensor with a zero-size dimension that gets no padding, while another
dimension is padded.

Nothing is negative: the zero-size dimension stays 0 and the result is simply empty.  Gathers that
pad every rank to the longest length (lucidrains' `pad_dim_to`, the catalogue's
`lucidrains_all_reduce`) hit it on a rank whose tensor is empty in another dimension, so that rank
raises while the others wait in the collective: a hang.  No ranks needed.
Run: timeout 60 python docs/findings/pad_zero_size_dim.py   (exit 1 = reproduced)
"""

import sys

import torch
import torch.nn.functional as F

CASES = [  # (input shape, pad), expected result shape
    (((0, 0), (0, 0, 0, 2)), (2, 0)),
    (((1, 0), (0, 0, 0, 1)), (2, 0)),
    (((3, 0, 2), (0, 0, 0, 0, 0, 1)), (4, 0, 2)),
    (((0, 3), (0, 0, 0, 2)), (2, 3)),  # the zero-size dim is the padded one: works everywhere
]


def main():
    print(f"torch {torch.__version__}: F.pad(torch.zeros(shape), pad), constant mode")
    reproduced = False
    for (shape, pad), expected in CASES:
        try:
            got = f"shape {tuple(F.pad(torch.zeros(shape), pad).shape)}"
        except RuntimeError as exc:
            got = f"RuntimeError: {str(exc).splitlines()[0][:100]}"
        ok = got == f"shape {expected}"
        reproduced |= not ok
        print(f"  shape {shape}, pad {pad}: expected shape {expected}, actual: {got}")
    print("\nREPRODUCED" if reproduced else "\nnot reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
