"""torch bug (pytorch #190007): `torch.distributed._functional_collectives.all_reduce(x, "avg", group)`
computes the average forward, and its backward raises
`all_reduce backward only supports 'sum' reduction, got 'avg'`, although the gradient of an average
is well defined (the average of the cotangents).  Checked as the catalogue row
`funcol_all_reduce_avg` (grad mean), this is a `gradients (exception)` finding.
Run: timeout 120 python docs/findings/funcol_all_reduce_avg_backward.py   (exit 1 = backward raised)
"""

import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from _ranks import launch, reported


def on_rank(rank, world):
    x = torch.full((2,), float(rank + 1), requires_grad=True)
    y = funcol.all_reduce(x, "avg", dist.group.WORLD)
    try:
        y.sum().backward()
        return f"forward {y.tolist()}, grad {x.grad.tolist()}"
    except RuntimeError as exc:
        return f"forward {y.tolist()}, backward RuntimeError: {str(exc).splitlines()[0][:100]}"


def main():
    print(f"torch {torch.__version__}: funcol.all_reduce(x, 'avg') forward, then backward")
    raised = False
    for rank, got in reported(launch(on_rank, 2)):
        print(f"  rank {rank}: {got}")
        raised |= "RuntimeError" in got
    print("\nbackward RAISED" if raised else "\nbackward ran")
    return 1 if raised else 0


if __name__ == "__main__":
    sys.exit(main())
