"""Finding: funcol.all_gather_single_coalesced / all_gather_into_tensor_coalesced reject complex
tensors on gloo ("RuntimeError: Invalid scalar type"), while funcol.all_gather_single and
dist.all_gather_into_tensor gather the same tensor fine (torch 2.13.0+cpu, gloo, 2 ranks).

See funcol_coalesced_complex_gloo.md.
Run: timeout 60 python docs/findings/funcol_coalesced_complex_gloo.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, outcomes, print_outcomes  # the shared launcher, beside this script


def work(rank, world):
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    xs = [torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64) * (r + 1) for r in range(world)]
    expected = torch.cat(xs)
    calls = {
        "funcol.all_gather_single(x, 0, WORLD)": lambda x: funcol.wait_tensor(
            funcol.all_gather_single(x, 0, dist.group.WORLD)),
        "funcol.all_gather_single_coalesced([x], WORLD)[0]": lambda x: funcol.wait_tensor(
            funcol.all_gather_single_coalesced([x], dist.group.WORLD)[0]),
        "funcol.all_gather_into_tensor_coalesced([x], WORLD)[0]": lambda x: funcol.wait_tensor(
            funcol.all_gather_into_tensor_coalesced([x], dist.group.WORLD)[0]),
    }
    present = {name: call for name, call in calls.items()  # all_gather_single*: torch 2.13 on
               if hasattr(funcol, name.split("(")[0].removeprefix("funcol."))}
    return {"expected": expected.tolist(), "results": outcomes(present, xs[rank], expected)}


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, complex64 input [1+2j, 3-4j] * (rank + 1)")
    return conclude(print_outcomes(launch(work, 2)))


if __name__ == "__main__":
    sys.exit(main())
