"""Targets checked under the wrong contract: the mistakes a user makes with the flags, not bugs.

Each is correct for what it computes; checked as something else, the harness must say which flag
fits (exit 2 before the search), never report a finding.  ``differentiable_at_one_rank`` is the
control: its behaviour differs between cases, so it stays a finding.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


@torch.no_grad()
def gather_no_grad(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """A correct ragged-free gather under ``torch.no_grad``: values right, never differentiable."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    return torch.cat(pieces, dim)


def reduce_scatter_even(x: torch.Tensor) -> torch.Tensor:
    """A correct reduce-scatter of even slots along dim 0 (``reduce_scatter_tensor``), told no sizes."""
    out = x.new_empty((x.shape[0] // dist.get_world_size(), *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x.contiguous())
    return out


class _ReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return reduce_scatter_even(x)

    @staticmethod
    def backward(ctx, cotangent: torch.Tensor) -> torch.Tensor:
        out = cotangent.new_empty((cotangent.shape[0] * dist.get_world_size(), *cotangent.shape[1:]))
        dist.all_gather_into_tensor(out, cotangent.contiguous())
        return out


def reduce_scatter_even_grad(x: torch.Tensor) -> torch.Tensor:
    """The same, differentiable: its backward gathers the cotangents (the adjoint)."""
    return _ReduceScatter.apply(x)


def differentiable_at_one_rank(x: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Returns x itself alone (differentiable), a plain all_gather otherwise (not): a bug, found as one."""
    if dist.get_world_size() == 1:
        return x
    return gather_no_grad(x, dim)
