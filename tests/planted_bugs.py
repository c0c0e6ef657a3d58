"""Planted buggy gathers: each is correct except for one flaw that one property, or one
dimension of the strategies, exposes.  ``tests/test_planted_bugs.py`` asserts the harness
finds each within the CI budget and shrinks it to a minimal case named in advance.

A flaw *around* the gather (a cast, a copy, a wrong dim passed in) wraps the project's one
correct gather, :func:`harness.ragged.all_gather_ragged` (``correct`` below); a flaw *inside*
the gather (ordering, padding, size exchange, backward) is assembled from the building blocks
below with that one step done wrong.
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist

from harness.ragged import all_gather_ragged, gather_sum

#: The reference-correct ragged gather with the ``sum`` gradient contract.
correct = gather_sum


def _sizes(length: int, dtype: torch.dtype = torch.int64) -> list[int]:
    mine = torch.tensor([length]).to(dtype)  # a narrow dtype wraps silently, as in the wild
    sizes = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, mine)
    return [int(s) for s in sizes]


def _gather_front(front: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """Pad ``front`` (gather dim first) to the longest rank, all_gather, return padded pieces."""
    longest = max(sizes)
    padded = torch.zeros((longest,) + tuple(front.shape[1:]), dtype=front.dtype)
    padded[: front.shape[0]] = front
    pieces = [torch.empty_like(padded) for _ in range(len(sizes))]
    dist.all_gather(pieces, padded)
    return pieces


def _unpad(pieces: list[torch.Tensor], sizes: list[int]) -> torch.Tensor:
    return torch.cat([p[:n] for p, n in zip(pieces, sizes)])


class _BuggyBackward(torch.autograd.Function):
    """Forward: the correct gather.  Backward: the flaw named by ``mode``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, mode: str) -> torch.Tensor:
        ctx.dim, ctx.mode = dim, mode
        ctx.sizes = _sizes(x.shape[dim])
        return all_gather_ragged(x, dim)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        rank = dist.get_rank()
        start = sum(ctx.sizes[:rank])
        if ctx.mode == "local":  # skips the all_reduce
            total = grad.contiguous()
        else:  # "flat-view": assumes a contiguous cotangent
            total = grad.view(-1).view(grad.shape)
            dist.all_reduce(total)
        return total.narrow(ctx.dim, start, ctx.sizes[rank]), None, None


# -- one bug per property ------------------------------------------------------------------------


def reversed_ranks(x: torch.Tensor, dim: int) -> torch.Tensor:
    """values: concatenates in reverse rank order."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0])
    pieces = _gather_front(front, sizes)
    return _unpad(pieces[::-1], sizes[::-1]).movedim(0, dim)


def float64_to_float32(x: torch.Tensor, dim: int) -> torch.Tensor:
    """dtype: returns float32 for float64 input (a ``.float()`` before the collective)."""
    return all_gather_ragged(x.float() if x.dtype == torch.float64 else x, dim)


def forgot_unpad(x: torch.Tensor, dim: int) -> torch.Tensor:
    """shape: pads every rank to the longest and never removes the padding."""
    front = x.movedim(dim, 0)
    return torch.cat(_gather_front(front, _sizes(front.shape[0]))).movedim(0, dim)


def returns_meta(x: torch.Tensor, dim: int) -> torch.Tensor:
    """device: the result ends up on the meta device."""
    return all_gather_ragged(x, dim).to("meta")


def squeezes_input(x: torch.Tensor, dim: int) -> torch.Tensor:
    """inputs-untouched: flattens the caller's tensor in place (``x.resize_``) on the way."""
    out = all_gather_ragged(x, dim)
    if x.dim() > 1:
        x.resize_(x.numel())
    return out


def local_only_backward(x: torch.Tensor, dim: int) -> torch.Tensor:
    """gradients: the backward skips the all_reduce (claims sum, delivers local)."""
    return _BuggyBackward.apply(x, dim, "local")


_BUFFERS: dict[tuple, torch.Tensor] = {}


def shared_output_buffer(x: torch.Tensor, dim: int) -> torch.Tensor:
    """stable: writes every result into one cached buffer per shape and returns it."""
    result = all_gather_ragged(x, dim)
    buffer = _BUFFERS.setdefault((tuple(result.shape), result.dtype), torch.empty_like(result))
    return buffer.copy_(result)


_CALLS = itertools.count()


def degrades_every_third_call(x: torch.Tensor, dim: int) -> torch.Tensor:
    """repeatable: every third call returns a zeroed result (think: a leaking buffer pool)."""
    result = all_gather_ragged(x, dim)
    return torch.zeros_like(result) if next(_CALLS) % 3 == 2 else result


# -- one bug per dimension of the strategies -----------------------------------------------------


def first_two_ranks_only(x: torch.Tensor, dim: int) -> torch.Tensor:
    """world size: only ever keeps the first two ranks' pieces (written for two GPUs)."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0])
    pieces = _gather_front(front, sizes)
    return torch.cat([p[:n] for p, n in list(zip(pieces, sizes))[:2]]).movedim(0, dim)


def assumes_equal_lengths(x: torch.Tensor, dim: int) -> torch.Tensor:
    """lengths: unpads every rank to rank 0's length (fine while lengths are equal)."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0])
    pieces = _gather_front(front, sizes)
    return torch.cat([p[: sizes[0]] for p in pieces]).movedim(0, dim)


def uint8_sizes(x: torch.Tensor, dim: int) -> torch.Tensor:
    """long lengths: exchanges lengths as uint8, so a length of 256 wraps to 0."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0], torch.uint8)
    return _unpad(_gather_front(front, sizes), sizes).movedim(0, dim)


def ignores_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    """dims: always gathers along dim 0 (without checking the other dims agree)."""
    sizes = _sizes(x.shape[0])
    return _unpad(_gather_front(x, sizes), sizes)


def negative_dim_off_by_one(x: torch.Tensor, dim: int) -> torch.Tensor:
    """negative dims: normalises ``dim`` with ``dim + ndim - 1`` (and checks nothing)."""
    wrong = dim + x.dim() - 1 if dim < 0 else dim
    front = x.movedim(wrong, 0)
    sizes = _sizes(front.shape[0])
    return _unpad(_gather_front(front, sizes), sizes).movedim(0, wrong)


def drops_imaginary(x: torch.Tensor, dim: int) -> torch.Tensor:
    """dtypes: gathers only the real part of complex input (and casts back)."""
    return all_gather_ragged(x.real.to(x.dtype) if x.is_complex() else x, dim)


def unpad_by_value(x: torch.Tensor, dim: int) -> torch.Tensor:
    """value classes: removes padding by value (drops every zero), 1-D style."""
    front = x.movedim(dim, 0)
    pieces = _gather_front(front, _sizes(front.shape[0]))
    flat = torch.cat(pieces)
    keep = (flat != 0).flatten(1).all(dim=1) if flat.dim() > 1 else flat != 0
    return flat[keep].movedim(0, dim)


def ignores_strides(x: torch.Tensor, dim: int) -> torch.Tensor:
    """layouts: reads the input's storage as if it were contiguous (``as_strided``)."""
    dense = torch.as_strided(x.detach(), x.shape, torch.empty(x.shape).stride())
    return all_gather_ragged(dense, dim)


def contiguous_cotangent_only(x: torch.Tensor, dim: int) -> torch.Tensor:
    """cotangents: the backward ``view``s the cotangent, which fails when it is not contiguous."""
    return _BuggyBackward.apply(x, dim, "flat-view")


# -- out-of-contract probes (--probe-misuse) ----------------------------------------------------


def equal_only_checked(x: torch.Tensor, dim: int) -> torch.Tensor:
    """An equal-only gather done right: ragged input raises on every rank, no hang."""
    sizes = _sizes(x.shape[dim])
    if len(set(sizes)) > 1:
        raise ValueError(f"equal lengths required along dim {dim}, got {sizes}")
    return all_gather_ragged(x, dim)
