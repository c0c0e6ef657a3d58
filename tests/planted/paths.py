"""Planted path bugs: ragged all_gathers that are correct everywhere except on one code path.

Each public function has the signature ``f(x, dim=0, group=None)``: it concatenates every group
member's ``x`` along ``dim`` in group-rank order (lengths along ``dim`` may differ, all other
dims are equal) and its backward follows the ``sum`` contract (rank r gets the sum over ranks of
their cotangents' slot r: the cotangent is all-reduced and each rank slices its own slot).  All
five share one gather, :class:`_PathGather`, whose ``bug`` argument switches on exactly one wrong
path, as third-party gathers go wrong: on a fast path, a layout path or a subgroup path only.

Plain torch only (no harness imports); every gloo dtype works forward, complex tensors travel
as their real view.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.autograd.function import once_differentiable
from torch.distributed import ProcessGroup


def equal_fast_path_wrong_slot(x: torch.Tensor, dim: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """When every member holds the same non-empty length, it skips the padding and gathers with
    ``dist.all_gather`` into a list, but concatenates that list rotated by one (rank 1's piece
    first), so the result is in the wrong rank order.  The padded (ragged) path, taken when the
    lengths differ or are all zero, is correct, and so is W=1 (rotating one piece changes nothing).

    Smallest failing case: W=2, 1-d, dim 0, lengths (1, 1).
    """
    return _gather(x, dim, group, "equal_fast_path_wrong_slot")


def equal_path_dim_swapped(x: torch.Tensor, dim: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """The same equal-length fast path, in the right order, but concatenated along dim 0 instead
    of ``dim``: right when ``dim % ndim == 0`` (or W=1), a wrong shape whenever the lengths are
    equal and non-empty at any other dim with W >= 2.

    Smallest failing case: W=2, 2-d, dim 1, lengths (1, 1) (shape (1, 1) on each rank: the result
    is (2, 1) where (1, 2) is right).
    """
    return _gather(x, dim, group, "equal_path_dim_swapped")


def zero_other_dim_crash(x: torch.Tensor, dim: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """For ndim >= 2 it first views the input as rows, ``reshape(-1, *shape[1:])`` with the gather
    dim in front, which torch refuses when another dim is 0 ("cannot reshape tensor of 0 elements
    ... the unspecified dimension size -1 can be any value").  The other dims are the same on
    every rank and the reshape comes before any collective, so every rank raises (no hang); any
    input with no other dim 0 (empty or zero-length gather dims included) is gathered correctly.

    Smallest failing case: W=1, 2-d, dim 0, length 0, shape (0, 0) (at W=2: lengths (1, 1),
    shape (1, 0)).
    """
    return _gather(x, dim, group, "zero_other_dim_crash")


def grad_wrong_at_3d_batch(x: torch.Tensor, dim: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """Forward is correct.  Backward all-reduces 3-d cotangents batch-first, (batch, seq, hidden)
    with seq the gather dim and batch the first other dim, but gets there with ``reshape`` where
    a transpose is needed, and comes back with a transpose: the gradient has the right shape and
    wrong values whenever batch > 1, the gathered length > 1 and hidden > 0.  Correct for ndim
    1, 2 and 4, and for 3-d inputs with batch 1.

    Smallest failing case: W=1, 3-d, dim 0, length 2, shape (2, 2, 1) (at W=2: lengths (1, 1),
    shape (1, 2, 1)).
    """
    return _gather(x, dim, group, "grad_wrong_at_3d_batch")


def global_rank_in_group(x: torch.Tensor, dim: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """Forward is correct.  Backward slices its own slot of the all-reduced cotangent at the
    *global* rank, ``dist.get_rank()``, where the group rank ``dist.get_rank(group)`` belongs.
    Right on the world group (and any group {0, ..., k-1}); in any other group the member with the
    highest global rank indexes past the group's lengths (IndexError on that rank) and the
    others take another member's slot.  The slot is taken after the backward's only collective,
    so the members never disagree on their collective calls (no hang).

    Smallest failing case: W=2, groups {0} and {1} (or rank 0 idle and rank 1 alone in (1,)),
    1-d, dim 0, length 1: rank 1's backward raises IndexError.
    """
    return _gather(x, dim, group, "global_rank_in_group")


def _gather(x: torch.Tensor, dim: int, group: ProcessGroup | None, bug: str) -> torch.Tensor:
    if x.ndim == 0 or not -x.ndim <= dim < x.ndim:
        raise IndexError(f"dim {dim} is out of range for a {x.ndim}-d tensor")
    return _PathGather.apply(x, dim % x.ndim, group, bug)


def _all_gather_single(output: torch.Tensor, input: torch.Tensor, group: ProcessGroup | None) -> None:
    """torch 2.13's ``all_gather_single`` (older releases: ``all_gather_into_tensor``, the same collective)."""
    getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(_real(output), _real(input), group=group)


def _real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor's real view (same storage, a trailing dim of 2); any other tensor itself."""
    return torch.view_as_real(t) if t.is_complex() else t


class _PathGather(torch.autograd.Function):
    """A correct ragged gather with the ``sum`` backward, except on the path ``bug`` names."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, group: ProcessGroup | None, bug: str) -> torch.Tensor:
        front = x.movedim(dim, 0)
        if bug == "zero_other_dim_crash" and front.ndim >= 2:
            front = front.reshape(-1, *front.shape[1:])  # BUG: -1 is ambiguous once another dim is 0
        world = dist.get_world_size(group)
        shape = torch.tensor(front.shape, dtype=torch.int64)
        shapes = shape.new_empty(world * front.ndim)
        _all_gather_single(shapes, shape, group)
        lengths: list[int] = shapes.view(world, front.ndim)[:, 0].tolist()
        ctx.dim, ctx.group, ctx.lengths, ctx.bug = dim, group, lengths, bug
        if bug in ("equal_fast_path_wrong_slot", "equal_path_dim_swapped") and min(lengths) == max(lengths) > 0:
            pieces = [torch.empty_like(x, memory_format=torch.contiguous_format) for _ in range(world)]
            dist.all_gather([_real(p) for p in pieces], _real(x.contiguous()), group=group)
            if bug == "equal_fast_path_wrong_slot":
                pieces = pieces[1:] + pieces[:1]  # BUG: rotated by one, rank 1's piece first
                return torch.cat(pieces, dim)
            return torch.cat(pieces, 0)  # BUG: dim 0, not dim
        longest = max(lengths)
        padded = front.new_zeros((longest, *front.shape[1:]))
        padded[: front.shape[0]] = front
        gathered = padded.new_empty((world * longest, *front.shape[1:]))
        _all_gather_single(gathered, padded, group)
        rows = torch.cat([torch.arange(r * longest, r * longest + n) for r, n in enumerate(lengths)])
        return gathered.index_select(0, rows).movedim(0, dim).contiguous()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        front = cotangent.movedim(ctx.dim, 0).clone(memory_format=torch.contiguous_format)
        if ctx.bug == "grad_wrong_at_3d_batch" and front.ndim == 3:
            seq, batch, hidden = front.shape
            batch_first = front.reshape(batch, seq, hidden)  # BUG: a reshape, not front.transpose(0, 1)
            dist.all_reduce(_real(batch_first), group=ctx.group)
            front = batch_first.transpose(0, 1)
        else:
            dist.all_reduce(_real(front), group=ctx.group)
        rank = dist.get_rank(ctx.group)
        if ctx.bug == "global_rank_in_group":
            rank = dist.get_rank()  # BUG: the global rank, not the rank in ctx.group
        start = sum(ctx.lengths[:rank])
        mine = front[start : start + ctx.lengths[rank]]
        return mine.movedim(0, ctx.dim).contiguous(), None, None, None
