"""Not a torch bug, a trap the harness words its finding by: c10d's in-place collectives do not move
autograd's version counter.  A differentiable mapping that all-reduces its caller's tensor in place
(Megatron's `_reduce` inside `reduce_from_tensor_model_parallel_region` does) overwrites what the op
before it saved for backward, and autograd does not notice: `sigmoid(h)` -> in-place all-reduce ->
backward gives sigmoid'(h) computed from the *reduced* values, a silently wrong gradient, no error.
(An ATen in-place write such as `x.add_(...)` moves the counter, and there autograd raises.)
Run: timeout 120 python docs/findings/inplace_all_reduce_silent_gradient.py   (exit 1 = silently wrong)
"""

import sys

import torch
import torch.distributed as dist
from _ranks import launch, reported


class ReduceFromRegion(torch.autograd.Function):
    """Megatron's reduce-from-region, as published: forward all-reduces its input in place."""

    @staticmethod
    def forward(ctx, x):
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def on_rank(rank, world):
    h = torch.tensor([0.5, -0.5], requires_grad=True)
    s = torch.sigmoid(h)  # sigmoid saves its output for backward
    before = s._version
    ReduceFromRegion.apply(s).sum().backward()
    true = torch.sigmoid(h.detach()) * (1 - torch.sigmoid(h.detach()))
    return before, s._version, h.grad.tolist(), true.tolist()


def main():
    print(f"torch {torch.__version__}: sigmoid(h) -> in-place dist.all_reduce in Function.forward -> backward")
    wrong = False
    for rank, (before, after, got, true) in reported(launch(on_rank, 2)):
        print(f"  rank {rank}: version counter {before} -> {after}; grad {got}, true {true}")
        wrong |= not torch.allclose(torch.tensor(got), torch.tensor(true))
    print("\nthe gradient is SILENTLY WRONG (no error raised)" if wrong else "\nthe gradient is right")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
