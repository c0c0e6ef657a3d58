"""Planted bugs in all-reduces, splits, copies and the rooted collectives (broadcast, scatter, reduce,
gather to one rank): each breaks one thing a real one gets wrong
(``tests/test_family.py``, ``benchmarks/family.py``).

Each is :mod:`harness.ragged`'s correct implementation with one mistake, or a form as published
code writes it (``dist.all_reduce(x)`` in place, Megatron's reduce-from-region writing its input)
with a correct twin.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from harness.ragged import all_gather_ragged, all_reduce, broadcast, copy_to_region, gather_to, reduce, scatter, split


class _Backward(torch.autograd.Function):
    """A correct sum forward (on a dense copy) with a chosen backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, backward: str, group: Any) -> torch.Tensor:
        ctx.backward, ctx.group = backward, group
        with torch.no_grad():
            return all_reduce(x, op="sum", group=group)

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        if ctx.backward == "identity":
            return cotangent.clone(), None, None
        return all_reduce(cotangent.contiguous(), op="sum", grad="identity", group=ctx.group) * 2, None, None


def identity_backward(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """flash-attention's shape: the sum forward, each rank's own cotangent back (right only under identity)."""
    return _Backward.apply(x, "identity", group)


def double_counted_backward(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """The sum forward, a backward that all-reduces the cotangents and counts them twice."""
    return _Backward.apply(x, "twice", group)


def mean_without_division(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """An average that forgets its 1/W (right at W=1)."""
    return all_reduce(x, op="sum", grad="sum", group=group)


def global_rank_in_group(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Gathers every member's x and sums the pieces of global ranks 0..G-1, a group's ranks taken for
    the world's: right on the world group and on a group of ranks 0..G-1, wrong in any other."""
    out = x.detach().clone(memory_format=torch.contiguous_format)
    members = dist.get_process_group_ranks(group) if group is not None else list(range(dist.get_world_size()))
    pieces = [torch.empty_like(out) for _ in members]
    dist.all_gather(pieces, out, group=group)
    return sum((pieces[members.index(g)] for g in range(len(members)) if g in members), out.new_zeros(out.shape))


def in_place(x: torch.Tensor, group: Any = None) -> None:
    """``dist.all_reduce(x, group=group)`` as called: no result, x written."""
    dist.all_reduce(x, group=group)


def in_place_forgets_a_dense_copy(x: torch.Tensor, group: Any = None) -> None:
    """In place, on a dense copy it then drops for a non-contiguous x: the result never reaches x."""
    target = x if x.is_contiguous() else x.contiguous()
    dist.all_reduce(target, group=group)


def async_pair(x: torch.Tensor, group: Any = None) -> tuple[torch.Tensor, Any]:
    """Correct, asynchronous: a dense copy of x all-reduced with ``async_op=True``, returned with its
    handle, as flash-attention's ``all_reduce_raw(x, group, async_op=True)``; right once it is waited on."""
    out = x.detach().clone(memory_format=torch.contiguous_format)
    return out, dist.all_reduce(out, group=group, async_op=True)


def async_in_place(x: torch.Tensor, group: Any = None) -> Any:
    """Correct, asynchronous and in place: returns only a handle; a non-dense x is reduced as a dense
    copy that a callback writes back, so its handle is a future (``get_future().then``, as DDP's hooks)."""
    if x.is_contiguous():
        return dist.all_reduce(x, group=group, async_op=True)
    dense = x.contiguous()
    return dist.all_reduce(dense, group=group, async_op=True).get_future().then(lambda _: x.copy_(dense))


def async_forgets_a_dense_copy(x: torch.Tensor, group: Any = None) -> Any:
    """:func:`async_in_place` without its write-back: a non-dense x never gets the result."""
    target = x if x.is_contiguous() else x.contiguous()
    return dist.all_reduce(target, group=group, async_op=True)


class ReduceFromRegion(torch.autograd.Function):
    """Megatron's ``_ReduceFromModelParallelRegion`` as published: forward all-reduces its input in
    place and returns it, backward is the identity."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> torch.Tensor:
        return cotangent


def in_place_dense(x: torch.Tensor, group: Any = None) -> None:
    """A correct in-place all-reduce: a non-dense x is reduced as a dense copy, written back."""
    dense = x if x.is_contiguous() else x.contiguous()
    dist.all_reduce(dense, group=group)
    if dense is not x:
        x.copy_(dense)


def funcol_style(x: torch.Tensor, reduceOp: str, group: Any = None) -> torch.Tensor:  # noqa: N803 - funcol's name
    """Takes the reduction by funcol's name (``'sum'``, ``'avg'``) and computes it right, its gradient
    the sum of the cotangents (their mean for an average)."""
    op = {"sum": "sum", "avg": "mean", "max": "max", "min": "min"}[reduceOp]
    if op in ("max", "min"):
        return all_reduce(x, op=op, group=group)
    return all_reduce(x, op=op, grad="mean" if op == "mean" else "sum", group=group)


class _SplitOwnGrad(torch.autograd.Function):
    """A correct split forward whose backward puts this rank's cotangent in its slot and zeros
    elsewhere: the gradient skips the gather of the other ranks' cotangents."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, sizes: list[int], group: Any) -> torch.Tensor:
        ctx.dim, ctx.sizes, ctx.rank = dim, sizes, dist.get_rank(group)
        with torch.no_grad():
            return split(x, dim, sizes, group=group)

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        pieces = [cotangent if r == ctx.rank else cotangent.new_zeros(_with_length(cotangent, ctx.dim, n))
                  for r, n in enumerate(ctx.sizes)]
        return torch.cat(pieces, dim=ctx.dim), None, None, None


def _with_length(t: torch.Tensor, dim: int, n: int) -> list[int]:
    shape = list(t.shape)
    shape[dim] = n
    return shape


def split_backward_not_gathering(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> torch.Tensor:
    """A split whose backward does not gather the cotangents (right at W=1)."""
    return _SplitOwnGrad.apply(x, dim, split_sizes, group)


def split_by_global_rank(x: torch.Tensor, dim: int, split_sizes: list[int], group: Any = None) -> torch.Tensor:
    """Keeps the slot of the *global* rank: right on the world group, wrong in a subgroup."""
    rank = dist.get_rank()  # the bug: the group's rank is dist.get_rank(group)
    return x.narrow(dim, sum(split_sizes[:rank]), split_sizes[rank]).clone()


class _CopyNoReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> torch.Tensor:
        return cotangent


def copy_without_all_reduce(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Copy-to-region whose backward forgets the all-reduce (right at W=1)."""
    return _CopyNoReduce.apply(x)


def copy_summing_twice(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Copy-to-region as ours, applied twice in a row: the cotangents all-reduced twice (W times too
    large at W >= 2)."""
    return copy_to_region(copy_to_region(x, group), group)



class _BroadcastGrad(torch.autograd.Function):
    """A correct broadcast forward (ours) with a chosen backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, src: int, group: Any, backward: str) -> torch.Tensor:
        ctx.src, ctx.group, ctx.backward = src, group, backward
        with torch.no_grad():
            return broadcast(x, src, group)

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        summed = all_reduce(cotangent.contiguous(), op="sum", group=ctx.group)
        if ctx.backward == "unreduced":  # the source keeps only its own cotangent
            grad = cotangent.clone() if dist.get_rank() == ctx.src else torch.zeros_like(cotangent)
        elif ctx.backward == "everywhere":  # every rank gets the sum, not only the source
            grad = summed
        else:  # "group rank": the global src compared with the group rank, as torch.distributed.nn does
            grad = summed if dist.get_rank(ctx.group) == ctx.src else torch.zeros_like(summed)
        return grad, None, None, None


def broadcast_backward_not_reduced(x: torch.Tensor, src: int = 0, group: Any = None) -> torch.Tensor:
    """The source's gradient is its own cotangent: the cotangents are not reduced to it."""
    return _BroadcastGrad.apply(x, src, group, "unreduced")


def broadcast_backward_everywhere(x: torch.Tensor, src: int = 0, group: Any = None) -> torch.Tensor:
    """Every rank's gradient is the sum, not only the source's."""
    return _BroadcastGrad.apply(x, src, group, "everywhere")


def broadcast_source_by_group_rank(x: torch.Tensor, src: int = 0, group: Any = None) -> torch.Tensor:
    """Decides which rank is the source by comparing the global ``src`` with the group rank."""
    return _BroadcastGrad.apply(x, src, group, "group rank")


class _DivideFirst(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        world = dist.get_world_size(group)
        parts = torch.view_as_real(x.contiguous()) if x.is_complex() else x.contiguous()
        out = (parts / world).contiguous()  # divided first, then summed: the other order of a mean
        dist.all_reduce(out, group=group)
        return torch.view_as_complex(out) if x.is_complex() else out

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor, None]:
        world = dist.get_world_size(ctx.group)
        parts = torch.view_as_real(cotangent.contiguous()) if cotangent.is_complex() else cotangent.contiguous()
        grad = (parts / world).contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return (torch.view_as_complex(grad) if cotangent.is_complex() else grad), None


def mean_divided_first(x: torch.Tensor, group: Any = None) -> torch.Tensor:
    """A correct mean that divides every rank's x by W before summing (DeepSpeed's pre-division)."""
    return _DivideFirst.apply(x, group)


class _RootedGrad(torch.autograd.Function):
    """One of ours forward (a scatter, a reduce, a gather to one rank) with a chosen wrong backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, forward: Any, root: int, group: Any, backward: str,
                dim: int) -> torch.Tensor:
        ctx.root, ctx.group, ctx.backward, ctx.dim, ctx.shape = root, group, backward, dim, x.shape
        ctx.rank = dist.get_rank(group)
        with torch.no_grad():
            return forward(x)

    @staticmethod
    def backward(ctx: Any, cotangent: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        c = cotangent.contiguous()
        if ctx.backward == "own":  # each rank its own cotangent, not the destination's
            grad = c.clone()
        elif ctx.backward == "all-reduced":  # every rank's cotangent summed, as an all-reduce's would be
            grad = all_reduce(c, op="sum", group=ctx.group)
        elif ctx.backward == "own slot":  # a gather's local contract: C_r[slot r], not C_dst[slot r]
            lengths = [0] * dist.get_world_size(ctx.group)
            dist.all_gather_object(lengths, ctx.shape[ctx.dim], group=ctx.group)
            grad = c.narrow(ctx.dim, sum(lengths[:ctx.rank]), lengths[ctx.rank]).clone()
        else:  # a scatter's gather of the cotangents, on the ranks the backward names
            gathered = all_gather_ragged(c, ctx.dim, grad="local", group=ctx.group)
            source = {"everywhere": True, "group rank": ctx.rank == ctx.root,
                      "not gathering": False}[ctx.backward]
            grad = gathered if source else torch.zeros_like(gathered)
            if ctx.backward == "not gathering" and dist.get_rank() == ctx.root:  # its own cotangent in its slot
                grad = torch.zeros(ctx.shape, dtype=c.dtype)
                grad.narrow(ctx.dim, 0, c.shape[ctx.dim]).copy_(c)
        return grad, None, None, None, None, None


def reduce_backward_own(x: torch.Tensor, dst: int = 0, group: Any = None) -> torch.Tensor:
    """A reduce whose backward gives each rank its own cotangent, not the destination's."""
    return _RootedGrad.apply(x, lambda t: reduce(t, dst, group=group), dst, group, "own", 0)


def reduce_backward_all_reduced(x: torch.Tensor, dst: int = 0, group: Any = None) -> torch.Tensor:
    """A reduce whose backward sums every rank's cotangent, as an all-reduce's would."""
    return _RootedGrad.apply(x, lambda t: reduce(t, dst, group=group), dst, group, "all-reduced", 0)


def reduce_mean_without_division(x: torch.Tensor, dst: int = 0, group: Any = None) -> torch.Tensor:
    """A reduce to an average that forgets its 1/W (right at W=1)."""
    return reduce(x, dst, op="sum", group=group)


def reduce_others_anything(x: torch.Tensor, dst: int = 0, group: Any = None) -> torch.Tensor:
    """A correct reduce whose other ranks return 42s (differentiable, the right shape): not judged, so it passes."""
    out = reduce(x, dst, group=group)
    return out if dist.get_rank() == dst else out * 0 + 42


def gather_to_backward_own_slot(x: torch.Tensor, dim: int, dst: int = 0, group: Any = None) -> torch.Tensor:
    """A gather to one rank whose backward is a gather's local contract: C_r[slot r], not C_dst[slot r]."""
    return _RootedGrad.apply(x, lambda t: gather_to(t, dim, dst, group), dst, group, "own slot", dim)


def scatter_backward_not_gathering(x: torch.Tensor, dim: int, split_sizes: list[int], src: int = 0,
                                   group: Any = None) -> torch.Tensor:
    """A scatter whose source gets only its own cotangent back, in its slot: the others' are not gathered."""
    return _RootedGrad.apply(x, lambda t: scatter(t, dim, split_sizes, src, group), src, group, "not gathering",
                             dim)


def scatter_backward_everywhere(x: torch.Tensor, dim: int, split_sizes: list[int], src: int = 0,
                                group: Any = None) -> torch.Tensor:
    """A scatter whose backward gives every rank the gathered cotangents, not only the source."""
    return _RootedGrad.apply(x, lambda t: scatter(t, dim, split_sizes, src, group), src, group, "everywhere", dim)


def scatter_source_by_group_rank(x: torch.Tensor, dim: int, split_sizes: list[int], src: int = 0,
                                 group: Any = None) -> torch.Tensor:
    """A scatter whose backward finds the source by comparing the global ``src`` with the group rank
    (as torch.distributed.nn.functional's scatter and gather do)."""
    return _RootedGrad.apply(x, lambda t: scatter(t, dim, split_sizes, src, group), src, group, "group rank", dim)


def gather_list_dense(tensor: torch.Tensor, gather_list: list[torch.Tensor] | None = None, dst: int = 0,
                      group: Any = None) -> None:
    """Correct: ``dist.gather``'s signature, as written (the destination's list filled, None
    elsewhere), x made dense first (torch 2.4.1's gloo gathers a view's storage; 2.13's does not)."""
    dist.gather(tensor.contiguous(), gather_list, dst=dst, group=group)


def gather_list_reversed(tensor: torch.Tensor, gather_list: list[torch.Tensor] | None = None, dst: int = 0,
                         group: Any = None) -> None:
    """:func:`gather_list_dense` with the list then reversed: the members' pieces in the wrong order."""
    dist.gather(tensor.contiguous(), gather_list, dst=dst, group=group)
    if gather_list is not None:
        gather_list.reverse()


def scatter_dense(tensor: torch.Tensor, scatter_list: list[torch.Tensor] | None = None, src: int = 0,
                  group: Any = None) -> None:
    """Correct: ``dist.scatter``'s signature, as written (the output first, the pieces at the source
    alone), each piece made dense first (gloo scatters a view's storage, pytorch #192920)."""
    dist.scatter(tensor, None if scatter_list is None else [p.contiguous() for p in scatter_list], src=src, group=group)


def scatter_list_rotated(tensor: torch.Tensor, scatter_list: list[torch.Tensor] | None = None, src: int = 0,
                         group: Any = None) -> None:
    """:func:`scatter_dense` sending each member the next member's piece."""
    pieces = None if scatter_list is None else [p.contiguous() for p in scatter_list[1:] + scatter_list[:1]]
    dist.scatter(tensor, pieces, src=src, group=group)


def bitwise_or_as_xor(x: torch.Tensor, reduceOp: str = "sum", group: Any = None) -> torch.Tensor:  # noqa: N803
    """Takes the reduction by funcol's name and reduces ``bor`` as ``BXOR``: right until two ranks
    set the same bit."""
    op = "bxor" if reduceOp == "bor" else reduceOp
    return all_reduce(x, op=op, grad="sum", group=group)
