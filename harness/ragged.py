"""Our own collectives: the ragged all_gather (any dim, any gloo dtype, a chosen gradient contract) and the family.

Forward: one shape exchange and one data collective (every rank's tensor zero-padded to the
longest length and gathered, then the valid rows selected in rank order).  Backward: ``sum`` and
``mean`` reduce-scatter the padded cotangent; ``local`` needs no collective.  The input is never
modified and every result is a fresh tensor.

Complex tensors travel as their real view (exact: the same bytes, and a complex sum is the sum of
the parts), because gloo's ``reduce_scatter`` rejects complex in older torch; this code runs in
users' processes, so it asks no probe nor torch version.  One concern: our own correct version of
each collective the harness checks (gather, reduce-scatter, all-to-all, all-reduce, split, copy,
broadcast, scatter, reduce, gather to one rank), the reference designs of the catalogue, sharing their helpers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from torch.autograd.function import once_differentiable
from torch.distributed import ProcessGroup

GRADS: tuple[str, ...] = ("sum", "local", "mean")


def _all_gather_single(output: torch.Tensor, input: torch.Tensor, group: ProcessGroup | None) -> None:
    """torch 2.13's ``all_gather_single`` (older: ``all_gather_into_tensor``), looked up on every
    call so that a wrapper installed later (the harness's collective log) sees it."""
    getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(_real(output), _real(input), group=group)


def _reduce_scatter_single(output: torch.Tensor, input: torch.Tensor, group: ProcessGroup | None) -> None:
    """torch 2.13's ``reduce_scatter_single`` (older: ``reduce_scatter_tensor``), summing."""
    getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)(_real(output), _real(input),
                                                                        op=dist.ReduceOp.SUM, group=group)


def _real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor's real view (same storage, a trailing dim of 2); any other tensor itself."""
    return torch.view_as_real(t) if t.is_complex() else t


def _divided(t: torch.Tensor, world: int) -> torch.Tensor:
    """``t / world``, a complex tensor part by part: torch 2.4 divides complex by a real scalar
    as complex division, which is not exact even by 1 (about 40 % of complex64 elements change in
    their last bit; 2.13 and 2.15 give the part-wise result for powers of two)."""
    if not t.is_complex():
        return t / world
    return torch.view_as_complex(torch.view_as_real(t) / world)


def all_gather_ragged(
    x: torch.Tensor, dim: int = 0, *, grad: str = "sum", group: ProcessGroup | None = None
) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` in rank order; lengths along ``dim`` may differ.

    Other dims must agree (a ``ValueError`` on every rank otherwise).  ``grad``: ``sum`` (rank r
    gets the sum over ranks of their cotangents' slot r), ``mean`` (over the world size) or
    ``local`` (its own cotangent's slot r).  Every rank of ``group`` must call it (and backward).
    """
    if grad not in GRADS:
        raise ValueError(f"grad must be one of {', '.join(GRADS)}, got {grad!r}")
    if x.ndim == 0 or not -x.ndim <= dim < x.ndim:
        raise IndexError(f"dim {dim} is out of range for a {x.ndim}-d tensor")
    return _RaggedGather.apply(x, dim % x.ndim, grad, group)


def gather_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Catalogue adapter: :func:`all_gather_ragged` with ``grad="sum"``."""
    return all_gather_ragged(x, dim, grad="sum")


def gather_local(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Catalogue adapter: :func:`all_gather_ragged` with ``grad="local"``."""
    return all_gather_ragged(x, dim, grad="local")


def gather_mean(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Catalogue adapter: :func:`all_gather_ragged` with ``grad="mean"``."""
    return all_gather_ragged(x, dim, grad="mean")


class _RaggedGather(torch.autograd.Function):
    """Forward gathers ragged input; backward applies the gradient contract in ``ctx.grad``."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, dim: int, grad: str, group: ProcessGroup | None
    ) -> torch.Tensor:
        front = x.movedim(dim, 0)
        lengths = _exchange_lengths(front, group)
        longest = max(lengths)
        rows = _valid_rows(lengths, longest, x.device)
        padded = front.new_zeros((longest, *front.shape[1:]))
        padded[: front.shape[0]] = front
        gathered = padded.new_empty((len(lengths) * longest, *front.shape[1:]))
        _all_gather_single(gathered, padded, group)
        ctx.dim, ctx.grad, ctx.group, ctx.rows = dim, grad, group, rows
        ctx.longest, ctx.slot = longest, _slot(lengths, dist.get_rank(group))
        return gathered.index_select(0, rows).movedim(0, dim).contiguous()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        front = cotangent.movedim(ctx.dim, 0)
        if ctx.grad == "local":
            mine = front[ctx.slot].clone(memory_format=torch.contiguous_format)
        else:
            own = ctx.slot.stop - ctx.slot.start
            mine = _reduce_scatter_slots(front, ctx.rows, ctx.longest, ctx.group)[:own]
            if ctx.grad == "mean":
                mine = _divided(mine, dist.get_world_size(ctx.group))
        return mine.movedim(0, ctx.dim), None, None, None


def _exchange_lengths(front: torch.Tensor, group: ProcessGroup | None) -> list[int]:
    """All-gather every rank's shape (gather dim first), check other dims, return lengths."""
    world = dist.get_world_size(group)
    shape = torch.tensor(front.shape, dtype=torch.int64, device=front.device)
    shapes = shape.new_empty(world * front.ndim)  # gloo takes only the flat (concatenated) form
    _all_gather_single(shapes, shape, group)
    shapes = shapes.view(world, front.ndim)
    rest = shapes[:, 1:]
    if not bool((rest == rest[0]).all()):
        raise ValueError(
            f"all_gather_ragged: shapes differ outside the gather dim: {shapes.tolist()}"
        )
    return shapes[:, 0].tolist()


def _valid_rows(lengths: list[int], longest: int, device: torch.device) -> torch.Tensor:
    """Indices into the ``[W*longest, ...]`` buffer of every rank's real rows, in rank order."""
    starts = [r * longest for r in range(len(lengths))]
    return torch.cat([torch.arange(s, s + n) for s, n in zip(starts, lengths)]).to(device)


def _slot(lengths: list[int], rank: int) -> slice:
    """Rank ``rank``'s rows in the concatenated output."""
    start = sum(lengths[:rank])
    return slice(start, start + lengths[rank])


def _reduce_scatter_slots(
    front: torch.Tensor, rows: torch.Tensor, longest: int, group: ProcessGroup | None
) -> torch.Tensor:
    """Pad every slot of the cotangent to ``longest`` rows and reduce-scatter (SUM) the blocks:
    this rank's block, zero rows after its slot."""
    padded = front.new_zeros((dist.get_world_size(group) * longest, *front.shape[1:]))
    padded.index_copy_(0, rows, front)
    mine = padded.new_empty((longest, *front.shape[1:]))
    _reduce_scatter_single(mine, padded, group)
    return mine


# -- the neighbours: reduce-scatter and all-to-all ---------------------------------------------------

OPS: tuple[str, ...] = ("sum", "mean", "max")


def reduce_scatter_ragged(x: torch.Tensor, dim: int = 0, split_sizes: list[int] | None = None, *, op: str = "sum",
                          group: ProcessGroup | None = None) -> torch.Tensor:
    """Rank r's slot of the reduction over ranks of their ``x``: rows ``split_sizes[r]`` long at
    ``sum(split_sizes[:r])`` along ``dim`` (``None``: W equal slots); ``op``: ``sum``, ``mean`` or
    ``max`` (all-reduced: gloo's reduce-scatter summed whatever the op in older torch).  The
    gradient is the adjoint: every rank's cotangent gathered in rank order.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    sizes = _slot_sizes(x, dim, split_sizes, group)
    return _RaggedReduceScatter.apply(x, dim % x.ndim, sizes, op, group)


def reduce_scatter_sum(x: torch.Tensor, dim: int, split_sizes: list[int],
                       group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`reduce_scatter_ragged` summing."""
    return reduce_scatter_ragged(x, dim, split_sizes, op="sum", group=group)


def reduce_scatter_mean(x: torch.Tensor, dim: int, split_sizes: list[int],
                       group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`reduce_scatter_ragged` averaging."""
    return reduce_scatter_ragged(x, dim, split_sizes, op="mean", group=group)


def reduce_scatter_max(x: torch.Tensor, dim: int, split_sizes: list[int],
                       group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`reduce_scatter_ragged` taking the maximum."""
    return reduce_scatter_ragged(x, dim, split_sizes, op="max", group=group)


def _slot_sizes(x: torch.Tensor, dim: int, split_sizes: list[int] | None, group: ProcessGroup | None) -> list[int]:
    """Each rank's slot length along ``dim``: ``split_sizes`` checked against x, or W equal slots."""
    if x.ndim == 0 or not -x.ndim <= dim < x.ndim:
        raise IndexError(f"dim {dim} is out of range for a {x.ndim}-d tensor")
    world = dist.get_world_size(group)
    sizes = _equal_slots(x.shape[dim], world) if split_sizes is None else [int(n) for n in split_sizes]
    if len(sizes) != world or sum(sizes) != x.shape[dim]:
        raise ValueError(f"split_sizes {sizes} should be {world} lengths adding up to x.shape[{dim}]={x.shape[dim]}")
    return sizes


def _equal_slots(length: int, world: int) -> list[int]:
    if length % world:
        raise ValueError(f"x.shape[dim]={length} does not split into {world} equal slots; pass split_sizes")
    return [length // world] * world


class _RaggedReduceScatter(torch.autograd.Function):
    """Forward reduce-scatters padded slots; backward gathers the cotangents (the adjoint)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, sizes: list[int], op: str,
                group: ProcessGroup | None) -> torch.Tensor:
        front = x.movedim(dim, 0)
        longest = max(sizes, default=0)
        rows = _valid_rows(sizes, longest, x.device)
        fill = _lowest(x.dtype) if op == "max" else 0
        padded = front.new_full((len(sizes) * longest, *front.shape[1:]), fill)
        padded.index_copy_(0, rows, front)
        rank = dist.get_rank(group)
        if op == "max":  # gloo's reduce_scatter_tensor sums whatever the op on older torch (2.4.1:
            # docs/findings/gloo_reduce_scatter_tensor_op_ignored.py); all_reduce keeps the op everywhere
            dist.all_reduce(padded, op=dist.ReduceOp.MAX, group=group)
            mine = padded.narrow(0, rank * longest, longest)
        else:
            mine = padded.new_empty((longest, *front.shape[1:]))
            getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)(_real(mine), _real(padded),
                                                                                group=group)
        mine = mine[: sizes[rank]]
        if op == "mean":
            mine = _divided(mine, len(sizes))
        ctx.dim, ctx.op, ctx.group = dim, op, group
        return mine.movedim(0, dim).contiguous()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        if ctx.op == "max":
            raise RuntimeError("reduce_scatter_ragged: op='max' has no gradient")
        gathered = all_gather_ragged(cotangent, ctx.dim, grad="local", group=ctx.group)
        if ctx.op == "mean":
            gathered = _divided(gathered, dist.get_world_size(ctx.group))
        return gathered, None, None, None, None


def _lowest(dtype: torch.dtype) -> float | int:
    """The padding a max ignores: the dtype's lowest value."""
    return torch.finfo(dtype).min if dtype.is_floating_point else torch.iinfo(dtype).min


def all_to_all_ragged(x: torch.Tensor, dim: int = 0, input_split_sizes: list[int] | None = None,
                      output_split_sizes: list[int] | None = None, *,
                      group: ProcessGroup | None = None) -> torch.Tensor:
    """Send ``input_split_sizes[s]`` rows of ``x`` along ``dim`` to rank s, in order; return the
    rows every rank sent this one, concatenated in source order (``output_split_sizes[s]`` from
    s).  ``None`` splits: W equal chunks.  The gradient is the reverse all-to-all of the cotangent.
    """
    if x.ndim == 0 or not -x.ndim <= dim < x.ndim:
        raise IndexError(f"dim {dim} is out of range for a {x.ndim}-d tensor")
    world = dist.get_world_size(group)
    send = _equal_slots(x.shape[dim], world) if input_split_sizes is None else [int(n) for n in input_split_sizes]
    receive = send if output_split_sizes is None else [int(n) for n in output_split_sizes]
    if len(send) != world or sum(send) != x.shape[dim] or len(receive) != world:
        raise ValueError(f"input_split_sizes {send} should be {world} lengths adding up to x.shape[{dim}]="
                         f"{x.shape[dim]}, output_split_sizes {receive} {world} lengths")
    return _RaggedAllToAll.apply(x, dim % x.ndim, send, receive, group)


class _RaggedAllToAll(torch.autograd.Function):
    """Forward exchanges the splits; backward sends the cotangent's rows back where they came from."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, send: list[int], receive: list[int],
                group: ProcessGroup | None) -> torch.Tensor:
        ctx.dim, ctx.send, ctx.receive, ctx.group = dim, send, receive, group
        return _exchange(x, dim, send, receive, group)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        return _exchange(cotangent, ctx.dim, ctx.receive, ctx.send, ctx.group), None, None, None, None


def _exchange(x: torch.Tensor, dim: int, send: list[int], receive: list[int],
              group: ProcessGroup | None) -> torch.Tensor:
    """One ``all_to_all_single`` of ``x``'s rows along ``dim`` (moved to the front, made dense)."""
    front = x.movedim(dim, 0).contiguous()
    out = front.new_empty((sum(receive), *front.shape[1:]))
    dist.all_to_all_single(_real(out), _real(front), output_split_sizes=receive, input_split_sizes=send, group=group)
    return out.movedim(0, dim).contiguous()


def all_to_all(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
               group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`all_to_all_ragged`."""
    return all_to_all_ragged(x, dim, input_split_sizes, output_split_sizes, group=group)


def relayout_ragged(x: torch.Tensor, scatter_dim: int, gather_dim: int, *,
                    group: ProcessGroup | None = None) -> torch.Tensor:
    """Sequence parallelism's all-to-all: ``x`` cut along ``scatter_dim`` as ``torch.tensor_split``
    cuts it, piece s sent to rank s, the pieces received concatenated along ``gather_dim`` (where
    lengths may differ) in rank order.  The gradient is the reverse re-layout.
    """
    if x.ndim < 2 or not (-x.ndim <= scatter_dim < x.ndim and -x.ndim <= gather_dim < x.ndim) \
            or scatter_dim % x.ndim == gather_dim % x.ndim:
        raise IndexError(f"scatter_dim {scatter_dim} and gather_dim {gather_dim} should be two different dims of "
                         f"a {x.ndim}-d tensor")
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    scatter, gather = scatter_dim % x.ndim, gather_dim % x.ndim
    lengths = _exchange_lengths(x.movedim(gather, 0), group)
    pieces = x.tensor_split(world, dim=scatter)
    shapes = [_with(pieces[rank].shape, gather, n) for n in lengths]  # what each rank sends this one
    flat = torch.cat([piece.reshape(-1) for piece in pieces])
    received = all_to_all_ragged(flat, 0, [piece.numel() for piece in pieces],
                                 [math.prod(shape) for shape in shapes], group=group)
    return torch.cat([part.reshape(shape) for part, shape in
                      zip(received.split([math.prod(shape) for shape in shapes]), shapes)], dim=gather)


def _with(shape: torch.Size, dim: int, n: int) -> list[int]:
    """``shape`` with ``n`` along ``dim``."""
    changed = list(shape)
    changed[dim] = n
    return changed


def relayout(x: torch.Tensor, scatter_dim: int, gather_dim: int, group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`relayout_ragged`."""
    return relayout_ragged(x, scatter_dim, gather_dim, group=group)


# -- all-reduce --------------------------------------------------------------------------------------

ALL_REDUCE_OPS: dict[str, str] = {"sum": "SUM", "mean": "SUM", "max": "MAX", "min": "MIN", "product": "PRODUCT",
                                  "band": "BAND", "bor": "BOR", "bxor": "BXOR"}
ALL_REDUCE_GRADS: tuple[str, ...] = ("identity", "sum", "mean")


def all_reduce(x: torch.Tensor, *, op: str = "sum", grad: str = "sum",
               group: ProcessGroup | None = None) -> torch.Tensor:
    """Every rank gets the reduction over ranks of their ``x`` (one shape on every rank), as a fresh
    tensor; ``x`` is never written.  ``op``: ``sum``, ``mean`` (the sum / W), ``max``, ``min``,
    ``product`` or a bitwise ``band``, ``bor``, ``bxor`` (integers).
    ``grad``: ``sum`` (the all-reduce of the cotangents: every rank's loss uses the result),
    ``mean`` (their mean) or ``identity`` (each rank its own cotangent: Megatron's
    reduce-from-region, where the ranks' losses are one loss); a max, min, product or bitwise one has none.
    """
    if op not in ALL_REDUCE_OPS:
        raise ValueError(f"op must be one of {', '.join(ALL_REDUCE_OPS)}, got {op!r}")
    if grad not in ALL_REDUCE_GRADS:
        raise ValueError(f"grad must be one of {', '.join(ALL_REDUCE_GRADS)}, got {grad!r}")
    return _AllReduce.apply(x, op, grad, group)


def all_reduce_sum(x: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`all_reduce` summing, its gradient the sum of the cotangents."""
    return all_reduce(x, op="sum", grad="sum", group=group)


def all_reduce_mean(x: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`all_reduce` averaging, its gradient the mean of the cotangents."""
    return all_reduce(x, op="mean", grad="mean", group=group)


def all_reduce_identity(x: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`all_reduce` summing, each rank's gradient its own cotangent."""
    return all_reduce(x, op="sum", grad="identity", group=group)


def all_reduce_max(x: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`all_reduce` taking the maximum."""
    return all_reduce(x, op="max", group=group)


def all_reduce_min(x: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    """Catalogue adapter: :func:`all_reduce` taking the minimum."""
    return all_reduce(x, op="min", group=group)


def _summed(t: torch.Tensor, op: str, group: ProcessGroup | None) -> torch.Tensor:
    """A dense copy of ``t`` all-reduced with ``op`` (gloo reduces storage order: a copy, never a view)."""
    out = t.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(_real(out), op=getattr(dist.ReduceOp, ALL_REDUCE_OPS[op]), group=group)
    return _divided(out, dist.get_world_size(group)) if op == "mean" else out


class _AllReduce(torch.autograd.Function):
    """Forward all-reduces a copy; backward applies the gradient contract in ``ctx.grad``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, op: str, grad: str, group: ProcessGroup | None) -> torch.Tensor:
        ctx.op, ctx.grad, ctx.group = op, grad, group
        return _summed(x, op, group)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        if ctx.op not in ("sum", "mean"):
            raise RuntimeError(f"all_reduce: op={ctx.op!r} has no gradient")
        if ctx.grad == "identity":
            return cotangent.clone(memory_format=torch.contiguous_format), None, None, None
        return _summed(cotangent, ctx.grad, ctx.group), None, None, None


# -- the replicated ones: split (scatter-to-region) and copy (copy-to-region) -------------------------


def split(x: torch.Tensor, dim: int = 0, split_sizes: list[int] | None = None, *,
          group: ProcessGroup | None = None) -> torch.Tensor:
    """Rank r's slot of ``x`` (the same x on every rank): ``split_sizes[r]`` rows at
    ``sum(split_sizes[:r])`` along ``dim`` (``None``: W equal slots), a fresh tensor.  The gradient is
    the adjoint: every rank's cotangent gathered in rank order (Megatron's scatter-to-region)."""
    sizes = _slot_sizes(x, dim, split_sizes, group)
    return _Split.apply(x, dim % x.ndim, sizes, group)


class _Split(torch.autograd.Function):
    """Forward keeps this rank's slot; backward gathers the cotangents (the adjoint)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, sizes: list[int], group: ProcessGroup | None) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        rank = dist.get_rank(group)
        return x.narrow(dim, sum(sizes[:rank]), sizes[rank]).clone(memory_format=torch.contiguous_format)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        return all_gather_ragged(cotangent, ctx.dim, grad="local", group=ctx.group), None, None, None


def copy_to_region(x: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    """``x`` itself forward (a fresh copy; the same x on every rank), the all-reduce (sum) of the
    cotangents backward: Megatron's copy-to-region, where each rank's branch feeds one loss."""
    return _CopyToRegion.apply(x, group)


class _CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        return x.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _summed(cotangent, "sum", ctx.group), None


# -- broadcast -----------------------------------------------------------------------------------------


def broadcast(x: torch.Tensor, src: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """Every rank gets the x of ``src`` (a global rank, as in ``dist.broadcast``), as a fresh tensor;
    ``x`` is never written.  The gradient goes to the source: grad x_src = the sum of every rank's
    cotangent, zero on the other ranks (each rank's loss uses the result)."""
    return _Broadcast.apply(x, src, group)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, src: int, group: ProcessGroup | None) -> torch.Tensor:
        ctx.source = dist.get_rank() == src
        ctx.group = group
        out = x.clone(memory_format=torch.contiguous_format)
        dist.broadcast(_real(out), src, group=group)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        summed = _summed(cotangent, "sum", ctx.group)
        return (summed if ctx.source else torch.zeros_like(summed)), None, None


# -- the other rooted ones: scatter from a source, reduce and gather to a destination --------------------


def scatter(x: torch.Tensor, dim: int = 0, split_sizes: list[int] | None = None, src: int = 0,
            group: ProcessGroup | None = None) -> torch.Tensor:
    """Rank r gets slot r of the x of ``src`` (a global rank, as in ``dist.scatter``): ``split_sizes[r]``
    rows along ``dim`` (``None``: W equal slots), a fresh tensor; the other ranks' x gives only the
    shape (every rank holds one).  The gradient is the adjoint: on the source every rank's
    cotangent gathered in rank order, zero elsewhere."""
    sizes = _slot_sizes(x, dim, split_sizes, group)
    return _Scatter.apply(x, dim % x.ndim, sizes, src, group)


class _Scatter(torch.autograd.Function):
    """Forward: the source's x broadcast as a dense copy, this rank's slot kept; backward: the gather."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, sizes: list[int], src: int,
                group: ProcessGroup | None) -> torch.Tensor:
        ctx.dim, ctx.group, ctx.source = dim, group, dist.get_rank() == src
        whole = x.clone(memory_format=torch.contiguous_format)
        dist.broadcast(_real(whole), src, group=group)
        rank = dist.get_rank(group)
        return whole.narrow(dim, sum(sizes[:rank]), sizes[rank]).clone(memory_format=torch.contiguous_format)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        gathered = all_gather_ragged(cotangent, ctx.dim, grad="local", group=ctx.group)
        return (gathered if ctx.source else torch.zeros_like(gathered)), None, None, None, None


def reduce(x: torch.Tensor, dst: int = 0, op: str = "sum", group: ProcessGroup | None = None) -> torch.Tensor:
    """``dst`` (a global rank, as in ``dist.reduce``) gets the reduction over ranks of their x (one
    shape on every rank) as a fresh tensor; the other ranks get what ``dist.reduce`` leaves them, not
    to be read.  ``x`` is never written.  The gradient is the adjoint: every rank gets the
    destination's cotangent (÷W for a mean, ``avg`` as funcol spells it); a max or min has none."""
    op = "mean" if op == "avg" else op
    if op not in ALL_REDUCE_OPS:
        raise ValueError(f"op must be one of {', '.join(ALL_REDUCE_OPS)}, got {op!r}")
    return _Reduce.apply(x, dst, op, group)


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dst: int, op: str, group: ProcessGroup | None) -> torch.Tensor:
        ctx.dst, ctx.op, ctx.group = dst, op, group
        out = x.clone(memory_format=torch.contiguous_format)
        dist.reduce(_real(out), dst, op=getattr(dist.ReduceOp, ALL_REDUCE_OPS[op]), group=group)
        return _divided(out, dist.get_world_size(group)) if op == "mean" else out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        if ctx.op in ("max", "min"):
            raise RuntimeError(f"reduce: op={ctx.op!r} has no gradient")
        sent = _from_destination(cotangent, ctx.dst, ctx.group)
        return (_divided(sent, dist.get_world_size(ctx.group)) if ctx.op == "mean" else sent), None, None, None


def gather_to(x: torch.Tensor, dim: int = 0, dst: int = 0, group: ProcessGroup | None = None) -> torch.Tensor:
    """``dst`` (a global rank, as in ``dist.gather``) gets the concatenation along ``dim`` of every
    rank's x in rank order (lengths may differ), a fresh tensor; the other ranks get it too, not to be
    read.  The gradient is the adjoint: rank r gets slot r of the destination's cotangent."""
    return _GatherTo.apply(x, dim % max(x.ndim, 1), dst, group)


class _GatherTo(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, dst: int, group: ProcessGroup | None) -> torch.Tensor:
        ctx.dim, ctx.dst, ctx.group = dim, dst, group
        ctx.slot = _slot(_exchange_lengths(x.movedim(dim, 0), group), dist.get_rank(group))
        return all_gather_ragged(x, dim, grad="local", group=group)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        sent = _from_destination(cotangent, ctx.dst, ctx.group)
        return sent.narrow(ctx.dim, ctx.slot.start, ctx.slot.stop - ctx.slot.start).clone(), None, None, None


def _from_destination(cotangent: torch.Tensor, dst: int, group: ProcessGroup | None) -> torch.Tensor:
    """A dense copy of the destination's ``cotangent`` on every rank: the adjoint of a collective to ``dst``."""
    sent = cotangent.clone(memory_format=torch.contiguous_format)
    dist.broadcast(_real(sent), dst, group=group)
    return sent
