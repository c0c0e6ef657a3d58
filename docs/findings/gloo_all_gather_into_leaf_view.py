"""Release difference (torch 2.4 and 2.5 raise; 2.6 and later do not): `dist.all_gather(pieces, x)`
inside an `autograd.Function.forward`, with `pieces[rank] = x` and `x` a view of a leaf that
requires grad, raises "a view of a leaf Variable that requires grad is being used in an in-place
operation" on the older releases; later ones write the same values in place and only move the
version counter.

Not a bug on either side: the output list aliasing the input is the caller's in-place write (the
harness's planted `writes_own_slot_in_place`), which the older releases refuse outright and the
newer ones let through.  The harness reports the first as a `values (exception)` finding and the
second as `inputs-untouched (in-place)`; `tests/test_planted_bugs.py` expects each on its releases.
Run: timeout 120 python docs/findings/gloo_all_gather_into_leaf_view.py   (exit 1 = the write raised)
"""

import sys

import torch
import torch.distributed as dist
from _ranks import launch, reported


class OwnSlotGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        pieces[dist.get_rank()] = x  # the input is its own slot of the output
        dist.all_gather(pieces, x)
        return torch.cat(pieces)

    @staticmethod
    def backward(ctx, grad):
        n = grad.shape[0] // dist.get_world_size()
        return grad[dist.get_rank() * n:(dist.get_rank() + 1) * n]


def on_rank(rank, world):
    leaf = torch.arange(6.0).reshape(2, 3).requires_grad_()
    x = leaf.t()[0]  # a view of the leaf (contiguous: one element per row of the transpose)
    try:
        y = OwnSlotGather.apply(x)
        return f"returned {y.tolist()}"
    except RuntimeError as exc:
        return f"RuntimeError: {str(exc).splitlines()[0][:110]}"


def main():
    print(f"torch {torch.__version__}: all_gather into [.., x, ..] inside Function.forward, x a view of a leaf")
    raised = False
    for rank, got in reported(launch(on_rank, 2)):
        print(f"  rank {rank}: {got}")
        raised |= got.startswith("RuntimeError")
    print("\nthe write RAISED (torch 2.4, 2.5)" if raised else "\nthe write went through (torch 2.6 and later)")
    return 1 if raised else 0


if __name__ == "__main__":
    sys.exit(main())
