"""lucidrains' ``all_gather_variable_dim`` / ``AllGatherFunction`` / ``AllGather`` modules.

The published module (in several of lucidrains' repositories, e.g. the mixture-of-experts
ones) calls ``pad_dim_to`` and ``exists`` without defining or importing them, and uses
``einops.rearrange``; this is the intended algorithm, with those two helpers as lucidrains
defines them elsewhere and ``rearrange`` spelled with plain indexing.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function

from harness.variants._collectives import all_gather_list


def exists(val: object) -> bool:
    """lucidrains' ``exists``."""
    return val is not None


def pad_dim_to(t: torch.Tensor, length: int, dim: int = 0) -> torch.Tensor:
    """lucidrains' ``pad_dim_to``: zero-pad ``t`` at the end of ``dim`` up to ``length``."""
    pad_length = length - t.shape[dim]
    zero_pairs = (-dim - 1) if dim < 0 else (t.ndim - dim - 1)
    return F.pad(t, (*((0, 0) * zero_pairs), 0, pad_length))


def all_gather_variable_dim(
    t: torch.Tensor, dim: int = 0, sizes: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather sizes along ``dim``, pad to the max, all_gather, keep positions ``arange < size``."""
    device, world_size = t.device, dist.get_world_size()
    if not exists(sizes):
        size = torch.tensor(t.shape[dim], device=device, dtype=torch.long)
        sizes = torch.stack(all_gather_list(size, world_size, torch.empty_like))
    assert sizes is not None  # what ``exists`` said, spelled for the type checker
    max_size = int(sizes.amax().item())
    padded_t = pad_dim_to(t, max_size, dim=dim)
    gathered_tensor = torch.cat(all_gather_list(padded_t, world_size, torch.empty_like), dim=dim)
    seq = torch.arange(max_size, device=device)
    mask = (seq[None, :] < sizes[:, None]).reshape(-1)
    indices = torch.arange(mask.shape[-1], device=device)[mask]
    return gathered_tensor.index_select(dim, indices), sizes


class AllGatherFunction(Function):
    """Backward splits the cotangent by the gathered sizes; optionally all-reduces it first."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, dim: int, sizes: torch.Tensor | None, all_reduce_grads: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x, batch_sizes = all_gather_variable_dim(x, dim=dim, sizes=sizes)
        ctx.dim = dim
        ctx.all_reduce_grads = all_reduce_grads
        ctx.batch_sizes = batch_sizes.tolist()
        return x, batch_sizes

    @staticmethod
    def backward(ctx: Any, grads: torch.Tensor, _: Any) -> tuple[torch.Tensor, None, None, None]:
        batch_sizes, rank = ctx.batch_sizes, dist.get_rank()
        if ctx.all_reduce_grads:
            dist.all_reduce(grads)
        grads_by_rank = grads.split(batch_sizes, dim=ctx.dim)
        return grads_by_rank[rank], None, None, None


class AllGather(nn.Module):
    """The module users instantiate; a no-op returning ``(x, None)`` outside multi-rank runs."""

    def __init__(self, dim: int, *, all_reduce_grads: bool = False) -> None:
        super().__init__()
        self.dim = dim
        self.all_reduce_grads = all_reduce_grads
        self.is_distributed = dist.is_initialized() and dist.get_world_size() > 1

    def forward(
        self, x: torch.Tensor, sizes: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if not self.is_distributed:
            return x, None
        return AllGatherFunction.apply(x, self.dim, sizes, self.all_reduce_grads)


def gather(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``AllGather(dim)(x)``: the published module with its default ``all_reduce_grads=False``.

    Returns the module's ``(gathered, sizes)`` pair, as published (read as ``first``); the
    adapter only builds the module, whose constructor takes the dim.

    Ragged along any dim: sizes are exchanged, every rank pads to the max along ``dim``,
    gathers, and selects the valid positions with a mask built from ``arange < size``.
    Backward returns this rank's piece of its own cotangent: the *local* gradient.  With one
    rank the module returns ``x`` itself.
    """
    return AllGather(dim)(x)


def gather_all_reduce_grads(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``AllGather(dim, all_reduce_grads=True)(x)``: claims the *sum* gradient.

    Backward all-reduces (SUM) the incoming cotangent in place, then splits it by the
    gathered sizes and returns this rank's piece.
    """
    return AllGather(dim, all_reduce_grads=True)(x)
