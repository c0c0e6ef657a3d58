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
import warnings

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn

from harness.ragged import all_gather_ragged, gather_sum

#: The reference-correct ragged gather with the ``sum`` gradient contract.
correct = gather_sum


def _sizes(length: int, dtype: torch.dtype = torch.int64, device: torch.device | str = "cpu") -> list[int]:
    """Every rank's ``length``, exchanged on ``device`` (nccl takes only CUDA tensors)."""
    mine = torch.tensor([length], device=device).to(dtype)  # a narrow dtype wraps silently, as in the wild
    sizes = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, mine)
    return [int(s) for s in sizes]


def _gather_front(front: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """Pad ``front`` (gather dim first) to the longest rank, all_gather, return padded pieces."""
    longest = max(sizes)
    padded = front.new_zeros((longest,) + tuple(front.shape[1:]))
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
        ctx.sizes = _sizes(x.shape[dim], device=x.device)
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
    sizes = _sizes(front.shape[0], device=front.device)
    pieces = _gather_front(front, sizes)
    return _unpad(pieces[::-1], sizes[::-1]).movedim(0, dim)


def float64_to_float32(x: torch.Tensor, dim: int) -> torch.Tensor:
    """dtype: returns float32 for float64 input (a ``.float()`` before the collective)."""
    return all_gather_ragged(x.float() if x.dtype == torch.float64 else x, dim)


def forgot_unpad(x: torch.Tensor, dim: int) -> torch.Tensor:
    """shape: pads every rank to the longest and never removes the padding."""
    front = x.movedim(dim, 0)
    return torch.cat(_gather_front(front, _sizes(front.shape[0], device=front.device))).movedim(0, dim)


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


_CALLS_SO_FAR = [0]
#: How many calls :func:`fails_after_many_calls` gets right: more than a check's strata and
#: Hypothesis examples make on one set of ranks, fewer than the fuzz engine's first batches.
RIGHT_CALLS = 300


def fails_after_many_calls(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Right for the first :data:`RIGHT_CALLS` calls in a process, then zeros (a cache that fills
    up, a counter that wraps): only a long run on warm ranks meets it."""
    _CALLS_SO_FAR[0] += 1
    out = all_gather_ragged(x, dim)
    return out if _CALLS_SO_FAR[0] <= RIGHT_CALLS else torch.zeros_like(out)


def first_two_ranks_only(x: torch.Tensor, dim: int) -> torch.Tensor:
    """world size: only ever keeps the first two ranks' pieces (written for two GPUs)."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0], device=front.device)
    pieces = _gather_front(front, sizes)
    return torch.cat([p[:n] for p, n in list(zip(pieces, sizes))[:2]]).movedim(0, dim)


def assumes_equal_lengths(x: torch.Tensor, dim: int) -> torch.Tensor:
    """lengths: unpads every rank to rank 0's length (fine while lengths are equal)."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0], device=front.device)
    pieces = _gather_front(front, sizes)
    return torch.cat([p[: sizes[0]] for p in pieces]).movedim(0, dim)


def uint8_sizes(x: torch.Tensor, dim: int) -> torch.Tensor:
    """long lengths: exchanges lengths as uint8, so a length of 256 wraps to 0."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0], torch.uint8, front.device)
    return _unpad(_gather_front(front, sizes), sizes).movedim(0, dim)


def ignores_dim(x: torch.Tensor, dim: int) -> torch.Tensor:
    """dims: always gathers along dim 0 (without checking the other dims agree)."""
    sizes = _sizes(x.shape[0], device=x.device)
    return _unpad(_gather_front(x, sizes), sizes)


def negative_dim_off_by_one(x: torch.Tensor, dim: int) -> torch.Tensor:
    """negative dims: normalises ``dim`` with ``dim + ndim - 1`` (and checks nothing)."""
    wrong = dim + x.dim() - 1 if dim < 0 else dim
    front = x.movedim(wrong, 0)
    sizes = _sizes(front.shape[0], device=front.device)
    return _unpad(_gather_front(front, sizes), sizes).movedim(0, wrong)


def drops_imaginary(x: torch.Tensor, dim: int) -> torch.Tensor:
    """dtypes: gathers only the real part of complex input (and casts back)."""
    return all_gather_ragged(x.real.to(x.dtype) if x.is_complex() else x, dim)


def unpad_by_value(x: torch.Tensor, dim: int) -> torch.Tensor:
    """value classes: removes padding by value (drops every zero), 1-D style."""
    front = x.movedim(dim, 0)
    pieces = _gather_front(front, _sizes(front.shape[0], device=front.device))
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


# -- misuse cases (--probe-misuse) --------------------------------------------------------------


def equal_only_checked(x: torch.Tensor, dim: int) -> torch.Tensor:
    """An equal-only gather done right: ragged input raises on every rank, no hang."""
    sizes = _sizes(x.shape[dim], device=x.device)
    if len(set(sizes)) > 1:
        raise ValueError(f"equal lengths required along dim {dim}, got {sizes}")
    return all_gather_ragged(x, dim)


# -- state kept between calls (history-dependent) ------------------------------------------------

_CACHED_SIZES: list[int] = []


def caches_sizes(x: torch.Tensor, dim: int) -> torch.Tensor:
    """history: exchanges the lengths on the first call only and reuses them ("they never change").

    Right on fresh ranks; after a call with other lengths it pads, truncates and unpads by
    the stale lengths.
    """
    front = x.movedim(dim, 0)
    if not _CACHED_SIZES:
        _CACHED_SIZES.extend(_sizes(front.shape[0], device=front.device))
    longest = max(_CACHED_SIZES)
    keep = min(front.shape[0], longest)
    padded = torch.zeros((longest,) + tuple(front.shape[1:]), dtype=front.dtype)
    padded[:keep] = front[:keep]
    pieces = [torch.empty_like(padded) for _ in _CACHED_SIZES]
    dist.all_gather(pieces, padded)
    return _unpad(pieces, _CACHED_SIZES).movedim(0, dim)


# -- arithmetic gathers: right values, other bits -----------------------------------------------


def zero_fill_all_reduce(x: torch.Tensor, dim: int) -> torch.Tensor:
    """bits: fairseq-style: each rank writes its slot into zeros and the result is all_reduce'd (SUM).

    Every value arrives, but ``-0.0 + 0.0`` is ``+0.0`` and a signalling NaN comes back quiet:
    right under ``values``, wrong under ``bits``.
    """
    front = x.detach().movedim(dim, 0)
    sizes = _sizes(front.shape[0], device=front.device)
    start = sum(sizes[: dist.get_rank()])
    out = front.new_zeros((sum(sizes),) + tuple(front.shape[1:]))
    out[start : start + front.shape[0]] = front
    dist.all_reduce(out)
    return out.movedim(0, dim)


# -- bugs confined to one dtype or one shape class (found early by the strata) ------------------


def int64_through_float64(x: torch.Tensor, dim: int) -> torch.Tensor:
    """int64: gathers int64 as float64 and casts back: wrong for magnitudes past 2**53."""
    if x.dtype != torch.int64:
        return all_gather_ragged(x, dim)
    return all_gather_ragged(x.double(), dim).to(torch.int64)


def pads_bool_as_int64(x: torch.Tensor, dim: int) -> torch.Tensor:
    """bool: accelerate-style padding with ``torch.zeros(..., dtype=torch.long)``: a shorter rank's
    bools become int64 (type promotion in ``cat``), so the ranks gather different dtypes."""
    front = x.movedim(dim, 0)
    sizes = _sizes(front.shape[0], device=front.device)
    missing = max(sizes) - front.shape[0]
    if missing:
        pad_dtype = torch.int64 if x.dtype == torch.bool else x.dtype
        front = torch.cat([front, torch.zeros((missing, *front.shape[1:]), dtype=pad_dtype)])
    pieces = [torch.empty_like(front) for _ in sizes]
    dist.all_gather(pieces, front)
    return _unpad(pieces, sizes).movedim(0, dim)


def bfloat16_through_float16(x: torch.Tensor, dim: int) -> torch.Tensor:
    """bfloat16: gathered as float16 (its range ends at 65504) and cast back."""
    if x.dtype != torch.bfloat16:
        return all_gather_ragged(x, dim)
    return all_gather_ragged(x.half(), dim).to(torch.bfloat16)


def float16_through_bfloat16(x: torch.Tensor, dim: int) -> torch.Tensor:
    """float16: gathered as bfloat16 (8 significand bits, not 11) and cast back."""
    if x.dtype != torch.float16:
        return all_gather_ragged(x, dim)
    return all_gather_ragged(x.to(torch.bfloat16), dim).half()


def complex64_drops_imaginary(x: torch.Tensor, dim: int) -> torch.Tensor:
    """complex64: gathers only the real part (complex128 is right)."""
    if x.dtype != torch.complex64:
        return all_gather_ragged(x, dim)
    return all_gather_ragged(x.real, dim).to(torch.complex64)


def uint8_saturates(x: torch.Tensor, dim: int) -> torch.Tensor:
    """uint8: treated as int8 on the way: everything past 127 saturates."""
    if x.dtype != torch.uint8:
        return all_gather_ragged(x, dim)
    return all_gather_ragged(x.clamp(max=127), dim)


# -- an in-place write that keeps the values ----------------------------------------------------


class _OwnSlotInPlace(torch.autograd.Function):
    """MoE-style token gather: the rank's own slot of the output list *is* its input."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int) -> torch.Tensor:
        ctx.dim = dim
        x = x.contiguous()
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        pieces[dist.get_rank()] = x
        dist.all_gather(pieces, x)
        return torch.cat(pieces, dim)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        n = grad.shape[ctx.dim] // dist.get_world_size()
        return grad.narrow(ctx.dim, dist.get_rank() * n, n), None


def writes_own_slot_in_place(x: torch.Tensor, dim: int) -> torch.Tensor:
    """inputs-untouched (in place): ``tensor_list[rank] = x; all_gather(tensor_list, x)`` writes x's own
    values back into x: equal values, but the version counter moves (equal sizes, local gradient)."""
    return _OwnSlotInPlace.apply(x, dim)


def relu_then_in_place_gather() -> str:
    """What the in-place write does in a model: relu saves its output, the gather writes into it,
    and backward refuses; the error's text (run on ranks by the test that claims it)."""
    hidden = torch.relu(torch.arange(3.0, requires_grad=True))
    try:
        writes_own_slot_in_place(hidden, 0).sum().backward()
    except RuntimeError as exc:
        return str(exc)
    return "backward passed"
# -- a bug confined to a layout (found early by the layout strata) ---------------------------------


def all_gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """sentence-transformers' ``all_gather_with_grad``: ``torch.cat`` of
    ``torch.distributed.nn.functional.all_gather``, whose gloo backward (torch 2.13) ignores the
    strides of a transposed cotangent: wrong only for 2-d or more inputs with such a cotangent."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated for all_gather_single in 2.13
        return torch.cat(dist_nn.all_gather(x), dim=0)

