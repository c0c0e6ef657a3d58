"""all_gather's neighbours: torch's reduce-scatters and all-to-alls, and the MoE all-to-alls.

One function per path, in the calling conventions the harness binds by name: ``x`` first;
``dim`` / ``scatter_dim``; ``group`` (``None`` = the world); ``split_sizes`` for a reduce-scatter's
per-member slots; ``input_split_sizes`` / ``output_split_sizes`` for an all-to-all's rows sent to /
received from each member.  Equal-split targets take no split parameter.  The claims are the
catalogue's (``docs/report.md``); "Measured" in a docstring means gloo, torch 2.13.0+cpu, W = 1..3
and a subgroup, several dtypes, equal, empty and ragged slots, contiguous and transposed inputs.
Published code is kept as written; the glue each docstring names is only what a CPU/gloo run in
one module needs.  Megatron's reduce-scatters and all-to-all are :mod:`harness.variants.megatron`.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.nn.functional as dist_nn

from harness.variants.torch_paths import _pg

__all__ = [
    "all_to_all_list",
    "all_to_all_single",
    "deepspeed_all_to_all",
    "fairseq_all_to_all",
    "funcol_all_to_all_single",
    "funcol_all_to_all_single_autograd",
    "funcol_reduce_scatter_single",
    "funcol_reduce_scatter_tensor",
    "funcol_reduce_scatter_tensor_autograd",
    "nn_all_to_all",
    "nn_all_to_all_single",
    "nn_reduce_scatter",
    "reduce_scatter_list",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_max",
]


# -- shared glue: the buffers torch's buffer-filling APIs need ------------------------------------------


def _equal_slot(x: torch.Tensor, pg: dist.ProcessGroup) -> torch.Tensor:
    """The output buffer of an equal dim-0 reduce-scatter: ``x``'s rows divided by the group size."""
    return x.new_empty((x.shape[0] // dist.get_world_size(pg), *x.shape[1:]))


def _split_with_slot(
    x: torch.Tensor, split_sizes: list[int], dim: int, pg: dist.ProcessGroup
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``x.split(split_sizes, dim)`` (one input per member) and a buffer shaped like this member's piece."""
    inputs = list(x.split(split_sizes, dim))
    return inputs, torch.empty_like(inputs[dist.get_rank(pg)])


def _received(x: torch.Tensor, output_split_sizes: list[int] | None) -> torch.Tensor:
    """The output buffer of ``all_to_all_single``: ``sum(output_split_sizes)`` rows, or ``x``'s shape."""
    if output_split_sizes is None:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return x.new_empty((sum(output_split_sizes), *x.shape[1:]))


def _received_list(x: torch.Tensor, output_split_sizes: list[int], dim: int) -> list[torch.Tensor]:
    """One buffer per source member for the list all-to-all: ``x``'s shape with ``dim`` of length n."""
    shape = list(x.shape)
    buffers = []
    for n in output_split_sizes:
        shape[dim] = n
        buffers.append(x.new_empty(shape))
    return buffers


# -- torch: reduce-scatter ------------------------------------------------------------------------------


def reduce_scatter_single(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``dist.reduce_scatter_single(out, x, group=group)`` (torch 2.13; absent from 2.4).

    Docstring: "Reduces, then scatters a tensor to all ranks in a group ... output (Tensor):
    Output tensor.  It should have the same size across all ranks.  input (Tensor): ... Its
    size should be output tensor size times the world size ... (i) a concatenation of the
    output tensors along the primary dimension".  Equal slots along dim 0, sum, no autograd.
    Glue: the API writes into a buffer the caller allocates.  Measured: correct, every case
    (non-contiguous inputs included).
    """
    pg = _pg(group)
    out = _equal_slot(x, pg)
    dist.reduce_scatter_single(out, x, group=pg)
    return out


def reduce_scatter_tensor(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``dist.reduce_scatter_tensor(out, x, group=group)``: deprecated in torch 2.13 for
    :func:`reduce_scatter_single`, which it calls (``FutureWarning`` silenced here); same contract."""
    pg = _pg(group)
    out = _equal_slot(x, pg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.reduce_scatter_tensor(out, x, group=pg)
    return out


def reduce_scatter_tensor_max(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``dist.reduce_scatter_tensor(out, x, op=ReduceOp.MAX, group=group)``: the element-wise
    **max** over the group of this member's slot (``op``: "Specifies an operation used for
    element-wise reductions").  Real dtypes only (max has no meaning for complex); no autograd.
    Measured: correct, every real case."""
    pg = _pg(group)
    out = _equal_slot(x, pg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.MAX, group=pg)
    return out


def reduce_scatter_list(
    x: torch.Tensor, split_sizes: list[int], dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``dist.reduce_scatter(out, list(x.split(split_sizes, dim)), group=group)``.

    Docstring: "Reduces, then scatters a list of tensors to all processes in a group.
    output (Tensor): Output tensor.  input_list (list[Tensor]): List of tensors to reduce and
    scatter."  Nothing asks for equal pieces: ragged slots (one per member), along the dim the
    caller splits.  No autograd.  Glue: the split into a list and this member's output buffer.
    Measured: correct, every case (ragged with zero-length slots, dims 0/1/-1, non-contiguous pieces).
    """
    pg = _pg(group)
    inputs, out = _split_with_slot(x, split_sizes, dim, pg)
    dist.reduce_scatter(out, inputs, group=pg)
    return out


def funcol_reduce_scatter_single(
    x: torch.Tensor, scatter_dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``_functional_collectives.reduce_scatter_single(x, "sum", scatter_dim, group)`` (torch 2.13).

    Docstring: "Reduces the tensor data across all machines in such a way that all get the
    final result, then scatter the results to corresponding ranks.  The input tensor is left
    unmodified."  Equal slots (``x.size(scatter_dim) % group_size`` is asserted); any
    ``scatter_dim`` (moved to the front by ``_chunk_or_narrow_cat``).  Autograd is registered
    on the op in 2.13 ("The base reduce_scatter_single now has autograd support"): backward
    all-gathers the cotangents (sum only), the **adjoint**.  Glue: ``group`` is required in
    torch; ``None`` here means the world.  Measured: values and gradients correct, every case,
    transposed inputs and cotangents included.
    """
    return funcol.reduce_scatter_single(x, "sum", scatter_dim, _pg(group))


def funcol_reduce_scatter_tensor(
    x: torch.Tensor, scatter_dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``_functional_collectives.reduce_scatter_tensor(x, "sum", scatter_dim, group)``: deprecated
    in 2.13 for :func:`funcol_reduce_scatter_single`, which it calls (warning silenced).  The path
    of pytorch#130251 (a non-contiguous input reduce-scattered wrongly, reported on CUDA): not
    reproduced on gloo (2.13.0 and 2.4.1, the issue's own input included); measured as
    :func:`funcol_reduce_scatter_single`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return funcol.reduce_scatter_tensor(x, "sum", scatter_dim, _pg(group))


def funcol_reduce_scatter_tensor_autograd(
    x: torch.Tensor, scatter_dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``_functional_collectives.reduce_scatter_tensor_autograd(x, "sum", scatter_dim, group)``:
    "the same as reduce_scatter_single but will propagate the backwards gradient across workers
    ... Currently only the "sum" reduceOp is supported" (deprecated alias, warning silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return funcol.reduce_scatter_tensor_autograd(x, "sum", scatter_dim, _pg(group))


def nn_reduce_scatter(
    x: torch.Tensor, split_sizes: list[int], dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``torch.distributed.nn.functional.reduce_scatter(out, list(x.split(split_sizes, dim)), group=group)``.

    Docstring: "Reduces, then scatters a list of tensors to all processes in a group ...
    Returns: Tensor: Output of the collective."  Differentiable (``_Reduce_Scatter``: forward
    ``dist.reduce_scatter`` of ``.contiguous()`` pieces; backward ``_AllGather`` of the
    cotangent, one gradient per input piece: the **adjoint**).  The docstring names no equal-size
    restriction, so ragged pieces are claimed as for :func:`reduce_scatter_list`; the backward
    gathers ``empty_like(cotangent)`` buffers, i.e. assumes every member's slot has this one's
    shape.  Deprecated in 2.13 for funcol ``reduce_scatter_single`` (warning silenced).
    Glue: the split and this member's output buffer.  Measured: values correct, ragged
    included; gradients correct for equal slots; ragged slots: the backward aborts a rank
    (gloo ``EnforceNotMet``, exit -6) and the member with the longest slot may return a
    gradient summed from uninitialized memory (``docs/findings/nn_reduce_scatter_ragged_backward_gloo.py``).
    """
    pg = _pg(group)
    inputs, out = _split_with_slot(x, split_sizes, dim, pg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return dist_nn.reduce_scatter(out, inputs, group=pg)


# -- torch: all-to-all ----------------------------------------------------------------------------------


def all_to_all_single(
    x: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """``dist.all_to_all_single(out, x, output_split_sizes, input_split_sizes, group=group)``.

    Docstring: "Split input tensor and then scatter the split list to all processes in a
    group.  Later the received tensors are concatenated from all the processes in the group
    and returned as a single output tensor.  Complex tensors are supported."  Split sizes are
    "for dim 0"; ``None`` = equal (dim 0 "must divide equally by world_size").  Ragged, dim 0,
    no autograd.  Glue: the output buffer, ``sum(output_split_sizes)`` rows.  Measured: correct
    for contiguous inputs, every dtype, ragged and empty; a non-contiguous input raises
    "Tensors must be contiguous" (c10d enforces it for all-to-all), and where only some members'
    inputs are non-contiguous the others wait until their timeout.
    """
    out = _received(x, output_split_sizes)
    dist.all_to_all_single(out, x, output_split_sizes, input_split_sizes, group=_pg(group))
    return out


def all_to_all_list(
    x: torch.Tensor,
    input_split_sizes: list[int],
    output_split_sizes: list[int],
    dim: int,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """``dist.all_to_all(outs, list(x.split(input_split_sizes, dim)), group=group)``, then ``torch.cat(outs, dim)``.

    Docstring: "Scatters list of input tensors to all processes in a group and return
    gathered list of tensors in output list.  Complex tensors are supported."  Its example
    sends pieces of different sizes ([2, 2, 1, 1] rows from rank 0): ragged is claimed.  No
    autograd.  Glue: the split, one buffer per source member (``output_split_sizes`` long
    along ``dim``), the concatenation.  Measured: correct for equal and empty pieces along any
    dim (non-contiguous pieces included); ragged pieces raise "ProcessGroupGloo::alltoall:
    invalid tensor size" (gloo's list all-to-all takes equal sizes only).
    """
    outs = _received_list(x, output_split_sizes, dim)
    dist.all_to_all(outs, list(x.split(input_split_sizes, dim)), group=_pg(group))
    return torch.cat(outs, dim)


def funcol_all_to_all_single(
    x: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """``_functional_collectives.all_to_all_single(x, output_split_sizes, input_split_sizes, group)``.

    Docstring: "Each process splits input tensor and then scatters the split list to all
    processes in a group.  Then concatenate the received tensors from all the processes in
    the group and return single output tensor."  Both split lists or neither (equal).  Ragged,
    dim 0.  Autograd is registered on the op in 2.13: backward is the all-to-all with the
    split sizes swapped, the **adjoint**.  Glue: ``group`` is required in torch; ``None`` = world.
    Measured: values and gradients correct for real dtypes (ragged, empty, transposed inputs and
    cotangents); complex64 raises "Invalid scalar type" when the result is read (known,
    ``docs/findings/funcol_coalesced_complex_gloo.md``).
    """
    return funcol.all_to_all_single(x, output_split_sizes, input_split_sizes, _pg(group))


def funcol_all_to_all_single_autograd(
    x: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """``_functional_collectives.all_to_all_single_autograd(...)``: "Same as all_to_all_single but
    supports autograd" (in 2.13 it calls it); same contract, **adjoint** gradient."""
    return funcol.all_to_all_single_autograd(x, output_split_sizes, input_split_sizes, _pg(group))


def nn_all_to_all_single(
    x: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """``torch.distributed.nn.functional.all_to_all_single(out, x, output_split_sizes, input_split_sizes, group)``.

    Docstring as :func:`all_to_all_single` ("Output split sizes for dim 0 ...").  Differentiable
    (``_AlltoAllSingle``: backward is the all-to-all of ``grad_output.contiguous()`` with the
    split sizes swapped, the **adjoint**).  Unlike its siblings in that module, the forward
    does not make ``x`` contiguous.  Deprecated in 2.13 (warning silenced).  Glue: the output
    buffer.  Measured: values and gradients correct (ragged, every dtype, transposed cotangents);
    a non-contiguous input raises "Tensors must be contiguous", as :func:`all_to_all_single`.
    """
    out = _received(x, output_split_sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return dist_nn.all_to_all_single(out, x, output_split_sizes, input_split_sizes, group=_pg(group))


def nn_all_to_all(
    x: torch.Tensor,
    input_split_sizes: list[int],
    output_split_sizes: list[int],
    dim: int,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """``torch.cat(torch.distributed.nn.functional.all_to_all(outs, list(x.split(input_split_sizes, dim)), group), dim)``.

    Docstring: "Each process scatters list of input tensors to all processes in a group and
    return gathered list of tensors in output list ... Returns: tuple([Tensor])".  No size
    restriction named: ragged pieces claimed.  Differentiable (``_AlltoAll``; backward is the
    reverse all-to-all into buffers of the input pieces' sizes, the **adjoint**).  On gloo it
    is a loop of ``dist.scatter(out[i], ..., src=i, group=group)`` with ``i`` a group rank
    passed where ``scatter`` takes a global rank.  Glue: split, buffers, concatenation.
    Measured: values and gradients correct for equal and empty pieces along any dim; ragged
    pieces raise "ProcessGroupGloo::scatter: invalid tensor size" (gloo's scatter takes equal
    sizes); the subgroup [1, 2] raises "Global rank 0 is not part of group" (the ``src`` mix-up,
    ``docs/findings/nn_all_gather_subgroup_backward_gloo.md``).
    """
    outs = _received_list(x, output_split_sizes, dim)
    return torch.cat(dist_nn.all_to_all(outs, list(x.split(input_split_sizes, dim)), group=_pg(group)), dim)


# -- DeepSpeed MoE and fairseq MoE: the GShard all-to-all of torch PR 40762 ----------------------------


class _DeepSpeedAllToAll(torch.autograd.Function):
    """DeepSpeed's ``_AllToAll``: microsoft/DeepSpeed ``deepspeed/moe/sharded_moe.py`` lines 95-108 at
    38327e07f6cd39b63418f60cedd1651b0be3e7c3 (master, 2025-02-21; file last changed fd405169).
    Renamed; ``deepspeed.comm.all_to_all_single`` -> ``torch.distributed.all_to_all_single``, which
    it calls with the same arguments (``deepspeed/comm/comm.py`` 337-352, ``deepspeed/comm/torch.py``
    297-309)."""

    @staticmethod
    def forward(ctx: Any, group: dist.ProcessGroup, input: torch.Tensor) -> torch.Tensor:
        ctx.group = group
        input = input.contiguous()
        output = torch.empty_like(input)
        dist.all_to_all_single(output, input, group=group)
        return output

    @staticmethod
    def backward(ctx: Any, *grad_output: torch.Tensor) -> tuple[None, torch.Tensor]:
        return (None, _DeepSpeedAllToAll.apply(ctx.group, *grad_output))


class _FairseqAllToAll(torch.autograd.Function):
    """fairseq's ``_AllToAll``: facebookresearch/fairseq ``fairseq/modules/moe/moe_layer.py`` lines
    40-56 at ebea0072062e2e8f4563644f27546df355357f5e (branch ``moe``; file last changed 9ea39b2c;
    the same class is at lines 51-67 on branch ``nllb``, 26d62ae8).  The file is absent from
    fairseq's ``main``.  Renamed; otherwise as written."""

    @staticmethod
    def forward(ctx: Any, group: dist.ProcessGroup, input: torch.Tensor) -> torch.Tensor:
        ctx.group = group
        input = input.contiguous()
        output = torch.empty_like(input)
        if torch.distributed.is_initialized():
            dist.all_to_all_single(output, input, group=group)
        else:
            assert group is None
            output = input
        return output

    @staticmethod
    def backward(ctx: Any, *grad_output: torch.Tensor) -> tuple[None, torch.Tensor]:
        return (None, _FairseqAllToAll.apply(ctx.group, *grad_output))


def deepspeed_all_to_all(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``_AllToAll.apply(group, x)`` of DeepSpeed MoE (``sharded_moe.py``: "Based on
    https://github.com/pytorch/pytorch/pull/40762").

    Claim: equal split along dim 0 (``torch.empty_like(input)`` out, no split sizes), every
    dtype, backward the same all-to-all of the cotangent (the **adjoint**; an equal all-to-all
    is its own inverse).  Adapter: the group comes first in the published API; ``None`` = world.
    Measured: values and gradients correct, every case.
    """
    return _DeepSpeedAllToAll.apply(_pg(group), x)


def fairseq_all_to_all(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``_AllToAll.apply(group, x)`` of fairseq MoE ("a mirror of the code in fairscale/nn/moe"):
    :func:`deepspeed_all_to_all`'s contract, plus "no process group: return the input".
    Adapter: the group first; ``None`` = world.  Measured: as DeepSpeed's, correct."""
    return _FairseqAllToAll.apply(_pg(group), x)
