"""gloo bug (the family of pytorch #192920): `dist.all_reduce(x)` on a non-dense view (a column of a
matrix, `base[:, 0]`) reduces the wrong elements on gloo: it pairs up elements by their place in the
view's storage, not by index, so ranks get values that are not the sum, and a rank whose view is dense
and one whose view is not disagree.  The catalogue's `ar_c10d_all_reduce` (`dist.all_reduce` as
written) is found on such an input.
Run: timeout 120 python docs/findings/gloo_all_reduce_strided_view.py   (exit 1 = wrong values)
"""

import sys

import torch
import torch.distributed as dist
from _ranks import launch, reported


def on_rank(rank, world):
    base = torch.arange(6.0).reshape(3, 2) + 100 * rank
    x = base[:, 0]  # values [0, 2, 4] (+100 r), stride 2: not dense
    expected = sum(torch.arange(6.0).reshape(3, 2)[:, 0] + 100 * r for r in range(world))
    dist.all_reduce(x)
    return x.tolist(), expected.tolist()


def main():
    print(f"torch {torch.__version__}: dist.all_reduce(base[:, 0]) on gloo, 2 ranks")
    wrong = False
    for rank, (got, expected) in reported(launch(on_rank, 2)):
        print(f"  rank {rank}: got {got}, expected {expected}")
        wrong |= got != expected
    print("\nWRONG values" if wrong else "\nright values")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
