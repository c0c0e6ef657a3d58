"""Planted bugs in reduce-scatters and all-to-alls: each breaks one thing a real one gets wrong.

Each is :mod:`harness.ragged`'s correct implementation with one mistake, so that the bug is
all that differs (``tests/test_neighbours.py`` finds each and checks the minimal case).  The
list forms (x taken as ``input_list``, an all-to-all's rows returned per source) come as a
correct pair (``rs_list``, ``a2a_lists``) and their planted twins.  The forms as published
code writes them come last: ``(output, handle)`` results, the group first (DeepSpeed-Ulysses'
``_SeqAllToAll``), two dims (ColossalAI's ``all_to_all_comm``), an output list the caller
passes (DGL's ``alltoallv``), each correct one with a planted twin, or the refusal of a re-layout.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from harness.ragged import _exchange, all_to_all_ragged, reduce_scatter_ragged


def rs_wrong_slot(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> torch.Tensor:
    """Each rank takes the next rank's slot: the slot index off by one (fine at W=1)."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    summed = x.clone()
    dist.all_reduce(summed, group=group)
    other = (rank + 1) % world
    start = sum(split_sizes[:other])
    return summed.narrow(dim, start, split_sizes[other])


def rs_dtype_hole(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> torch.Tensor:
    """Reduces in float32 whatever the dtype: float64 and int64 come back as float32."""
    return reduce_scatter_ragged(x.to(torch.float32) if x.dtype in (torch.float64, torch.int64) else x, dim,
                                 split_sizes, group=group)


class _LocalOnlyGrad(torch.autograd.Function):
    """A reduce-scatter whose backward puts the rank's own cotangent in its own slot and zeros
    elsewhere: the gradient skips the gather of the other ranks' cotangents."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, split_sizes: list[int], group: Any) -> torch.Tensor:
        ctx.dim, ctx.sizes, ctx.rank = dim, split_sizes, dist.get_rank(group)
        with torch.no_grad():
            return reduce_scatter_ragged(x, dim, split_sizes, group=group)

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        pieces = [cotangent if r == ctx.rank else cotangent.new_zeros(_with_length(cotangent, ctx.dim, n))
                  for r, n in enumerate(ctx.sizes)]
        return torch.cat(pieces, dim=ctx.dim), None, None, None


def rs_local_grad(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> torch.Tensor:
    return _LocalOnlyGrad.apply(x, dim, split_sizes, group)


def _with_length(t: torch.Tensor, dim: int, n: int) -> tuple[int, ...]:
    shape = list(t.shape)
    shape[dim] = n
    return tuple(shape)


def a2a_reversed_sources(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
                         group: Any = None) -> torch.Tensor:
    """Concatenates what it received in reverse source order: the wrong split order."""
    got = all_to_all_ragged(x, dim, input_split_sizes, output_split_sizes, group=group)
    return torch.cat(list(reversed(got.split(output_split_sizes, dim))), dim=dim)


def a2a_transposed_splits(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
                          group: Any = None) -> torch.Tensor:
    """Sends by what it should receive: input and output split sizes swapped (right when symmetric)."""
    if sum(output_split_sizes) != x.shape[dim]:
        return all_to_all_ragged(x, dim, input_split_sizes, output_split_sizes, group=group)
    return all_to_all_ragged(x, dim, output_split_sizes, input_split_sizes, group=group)


class _ForwardAgain(torch.autograd.Function):
    """An all-to-all whose backward sends the cotangent forward again with the same splits,
    not back: right only where every split is symmetric."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, send: list[int], receive: list[int], group: Any) -> torch.Tensor:
        ctx.dim, ctx.send, ctx.receive, ctx.group = dim, send, receive, group
        return _exchange(x, dim, send, receive, group)

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        # the planted bug: the same direction, split sizes as the forward had them, cut to fit
        back = cotangent.narrow(ctx.dim, 0, min(cotangent.shape[ctx.dim], sum(ctx.send)))
        padded = torch.cat([back, back.new_zeros(_with_length(back, ctx.dim, sum(ctx.send) - back.shape[ctx.dim]))],
                           dim=ctx.dim)
        return padded, None, None, None, None


def a2a_forward_grad(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
                     group: Any = None) -> torch.Tensor:
    return _ForwardAgain.apply(x, dim, input_split_sizes, output_split_sizes, group)


def a2a_dtype_hole(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
                   group: Any = None) -> torch.Tensor:
    """bool travels as uint8 and is not turned back: the dtype silently changed."""
    moved = x.to(torch.uint8) if x.dtype == torch.bool else x
    return all_to_all_ragged(moved, dim, input_split_sizes, output_split_sizes, group=group)


def rs_list(input_list: list[torch.Tensor], dim: int, group: Any = None) -> torch.Tensor:
    """Correct, list in (as ``dist.reduce_scatter(out, input_list)`` takes it): the slots are the pieces."""
    return reduce_scatter_ragged(torch.cat(input_list, dim), dim, [t.shape[dim] for t in input_list], group=group)


def rs_list_own_piece(input_list: list[torch.Tensor], dim: int, group: Any = None) -> torch.Tensor:
    """Returns this rank's own piece unreduced: the reduction over ranks skipped (right at W=1)."""
    return input_list[dist.get_rank(group)].clone()


def a2a_lists(input_list: list[torch.Tensor], output_split_sizes: list[int], dim: int,
              group: Any = None) -> list[torch.Tensor]:
    """Correct, list in and list out (as ``dist.all_to_all(outs, input_list)``): the rows from each source."""
    sent = torch.cat(input_list, dim)
    got = all_to_all_ragged(sent, dim, [t.shape[dim] for t in input_list], output_split_sizes, group=group)
    return list(got.split(output_split_sizes, dim))


def a2a_lists_reversed(input_list: list[torch.Tensor], output_split_sizes: list[int], dim: int,
                       group: Any = None) -> list[torch.Tensor]:
    """Returns the per-source pieces in reverse source order: the wrong order, list out."""
    return list(reversed(a2a_lists(input_list, output_split_sizes, dim, group)))


__all__ = ["AllToAllGroupFirst", "AllToAllGroupFirstLocalGrad", "SeqAllToAll", "SeqAllToAllUnswappedGrad",
           "a2a_dtype_hole", "a2a_forward_grad", "a2a_half_bound", "a2a_lists", "a2a_lists_reversed",
           "a2a_reversed_sources", "a2a_transposed_splits", "a2a_two_dims", "a2a_with_handle",
           "a2a_with_handle_reversed", "alltoallv", "alltoallv_own_flipped", "relayout_by_reshape",
           "relayout_fixed_dims", "rs_dtype_hole",
           "rs_equal_only", "rs_in_place", "rs_list", "rs_list_own_piece", "rs_local_grad", "rs_with_handle",
           "rs_wrong_slot"]


def rs_equal_only(x: torch.Tensor, dim: int, group: Any = None) -> torch.Tensor:
    """Equal slots, told nothing of sizes (as ``reduce_scatter_tensor`` is): right with --no-ragged."""
    return reduce_scatter_ragged(x, dim, group=group)


# -- as people write them: (out, handle) results, the group first, two dims ---------------------------


def a2a_with_handle(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
                    group: Any = None, async_op: bool = False) -> tuple[torch.Tensor, Any]:
    """Correct, returning ``(output, handle)`` as megablocks' ``all_to_all`` does (no handle unless async)."""
    return all_to_all_ragged(x, dim, input_split_sizes, output_split_sizes, group=group), None


def a2a_with_handle_reversed(x: torch.Tensor, dim: int, input_split_sizes: list[int], output_split_sizes: list[int],
                             group: Any = None) -> tuple[torch.Tensor, Any]:
    """``(output, handle)``, the output's sources in reverse order."""
    return a2a_reversed_sources(x, dim, input_split_sizes, output_split_sizes, group=group), None


def rs_with_handle(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> tuple[torch.Tensor, Any]:
    """Correct, returning ``(output, handle)``."""
    return reduce_scatter_ragged(x, dim, split_sizes, group=group), None


def rs_in_place(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> torch.Tensor:
    """Right values, but sums into its input in place: every rank's x is left holding the sum."""
    summed = x.contiguous()
    dist.all_reduce(summed, group=group)
    start = sum(split_sizes[: dist.get_rank(group)])
    result = summed.narrow(dim, start, split_sizes[dist.get_rank(group)]).clone()
    with torch.no_grad():
        x.copy_(summed)
    return result


def _seq_all_to_all(x: torch.Tensor, scatter_idx: int, gather_idx: int, group: Any) -> torch.Tensor:
    """DeepSpeed-Ulysses' re-layout: ``scatter_idx`` cut into W equal pieces, piece s sent to rank
    s, the pieces received concatenated along ``gather_idx`` (one dim when both are equal)."""
    world = dist.get_world_size(group)
    moved = x.movedim(scatter_idx, 0)
    send = moved.reshape(world, moved.shape[0] // world, *moved.shape[1:]).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group)
    return torch.cat([received[s].movedim(0, scatter_idx) for s in range(world)], dim=gather_idx)


class SeqAllToAll(torch.autograd.Function):
    """Correct, as DeepSpeed-Ulysses' ``_SeqAllToAll`` is written: the group first, then the
    input, ``scatter_idx`` and ``gather_idx``; the backward is the reverse re-layout.  Equal
    pieces only (heads divisible by W, one sequence length)."""

    @staticmethod
    def forward(ctx: Any, group: Any, input: torch.Tensor, scatter_idx: int, gather_idx: int) -> torch.Tensor:
        ctx.group, ctx.scatter_idx, ctx.gather_idx = group, scatter_idx, gather_idx
        return _seq_all_to_all(input, scatter_idx, gather_idx, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, None, None]:
        return None, SeqAllToAll.apply(ctx.group, grad, ctx.gather_idx, ctx.scatter_idx), None, None


class SeqAllToAllUnswappedGrad(SeqAllToAll):
    """``SeqAllToAll`` whose backward makes the forward's re-layout again instead of the reverse one
    (dims not swapped): right at W=1, where a re-layout moves nothing; at W=2 the gradient has the
    wrong shape."""

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, None, None]:
        return None, _seq_all_to_all(grad, ctx.scatter_idx, ctx.gather_idx, ctx.group), None, None


def relayout_by_reshape(x: torch.Tensor, scatter_idx: int, gather_idx: int, group: Any = None) -> torch.Tensor:
    """A re-layout by reshapes, as DeepSpeed-Ulysses' first ``single_all_to_all`` (scatter dim >= 1):
    the dims before the scatter dim flattened into one, the pieces received reshaped into the gather
    dim.  Right where every dim before the gather dim has size 1 (a batch of one, or the gather dim
    first as in (s, b, h, d)); with a batch of two before the sequence, batch and sequence mix."""
    world = dist.get_world_size(group)
    shape = list(x.shape)
    scatter = scatter_idx % x.ndim
    shape[scatter] //= world
    leading = math.prod(shape[:scatter])  # written out, not -1: an empty input reshapes too
    send = x.reshape([leading, world, shape[scatter], *shape[scatter + 1:]]).transpose(0, 1).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group)
    shape[gather_idx % x.ndim] *= world
    return received.reshape(shape)


def relayout_fixed_dims(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Correct, its dims fixed in its code as many Ulysses layers' are: (batch, sequence, heads, ...)
    heads scattered, sequence gathered; checked with --scatter-dim 2 --gather-dim 1."""
    return _seq_all_to_all(x, 2, 1, group)


class AllToAllGroupFirst(torch.autograd.Function):
    """Correct, the group first as the Ulysses functions take it, one dim: ``apply(group, input, dim)``."""

    @staticmethod
    def forward(ctx: Any, group: Any, input: torch.Tensor, dim: int) -> torch.Tensor:
        ctx.group, ctx.dim = group, dim
        return _seq_all_to_all(input, dim, dim, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, None]:
        return None, AllToAllGroupFirst.apply(ctx.group, grad, ctx.dim), None


class AllToAllGroupFirstLocalGrad(torch.autograd.Function):
    """``AllToAllGroupFirst`` whose backward returns the cotangent as it came: no exchange back (right at W=1)."""

    @staticmethod
    def forward(ctx: Any, group: Any, input: torch.Tensor, dim: int) -> torch.Tensor:
        return _seq_all_to_all(input, dim, dim, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, torch.Tensor, None]:
        return None, grad, None


def a2a_two_dims(input_: torch.Tensor, process_group: Any = None, scatter_dim: int = 2,
                 gather_dim: int = 1) -> torch.Tensor:
    """ColossalAI's ``all_to_all_comm`` signature: a re-layout, both dims bound by name."""
    return _seq_all_to_all(input_, scatter_dim, gather_dim, process_group)


def a2a_half_bound(input_: torch.Tensor, scatter_dim: int = 2, seq_dim: int = 1, group: Any = None) -> torch.Tensor:
    """Two dims, one of a name the harness does not bind (``seq_dim``): checked, it would be left
    at its default, a call other than the one judged, so it is refused (exit 2)."""
    return _seq_all_to_all(input_, scatter_dim, seq_dim, group)


def alltoallv(rank: int, world_size: int, output_tensor_list: list[torch.Tensor],
              input_tensor_list: list[torch.Tensor]) -> None:
    """Correct, as DGL's ``alltoallv_cpu`` is written: rank and world size first, the caller's
    output list filled (its own piece by replacing the item), nothing returned."""
    senders = []
    for i in range(world_size):
        if i == rank:
            output_tensor_list[i] = input_tensor_list[i].clone()
        else:
            senders.append(dist.isend(input_tensor_list[i].contiguous(), dst=i))
    for i in range(world_size):
        if i != rank:
            dist.recv(output_tensor_list[i], src=i)
    for sender in senders:
        sender.wait()


def alltoallv_own_flipped(rank: int, world_size: int, output_tensor_list: list[torch.Tensor],
                          input_tensor_list: list[torch.Tensor]) -> None:
    """``alltoallv`` that keeps its own rows in reverse order (right where it keeps at most one)."""
    alltoallv(rank, world_size, output_tensor_list, input_tensor_list)
    output_tensor_list[rank] = output_tensor_list[rank].flip(0)

