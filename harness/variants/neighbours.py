"""all_gather's neighbours: reduce-scatter and all-to-all, torch's own paths and published ones.

One function per path, in the calling conventions the harness binds by name: the input ``x``
first; ``dim`` / ``scatter_dim`` for the dimension; ``group`` (``None`` = the world);
``split_sizes`` for a reduce-scatter's per-member output slots (ragged, member order);
``input_split_sizes`` / ``output_split_sizes`` for an all-to-all's rows sent to / received
from each member.  Equal-split targets take no split parameter (the dimension divides by
the group size; chunk k is member k's).  Every function uses the process group it is given.

Results: reduce-scatter returns this member's slot of the sum (``max`` for the one ``MAX``
path) over the group's inputs; all-to-all returns the concatenation, in source-member order,
of what each member sent here.  Gradient column: ``adjoint`` = the reverse collective of the
cotangent (an all_gather of the cotangents for reduce-scatter, the reverse all-to-all for
all-to-all); ``none`` = not differentiable.  The table is each author's claim, not the
truth.  "Measured" in a docstring: gloo, torch 2.13.0+cpu, W = 1..3 and the subgroup [1, 2]
of 3 ranks, float32/float64/complex64/int64, equal, all-empty and ragged (zero-length) slots,
contiguous and transposed inputs and cotangents, against a float64 single-process reference.  Its length is the catalogue's: one function per published path.

================================================== ==== ======================================= ====== ==== ====== =======
function                                           coll call after ``x``                         ragged dims dtypes grad
================================================== ==== ======================================= ====== ==== ====== =======
reduce_scatter_single                              RS   ``group=``                              no     0    gloo   none
reduce_scatter_tensor                              RS   same (deprecated alias)                 no     0    gloo   none
reduce_scatter_tensor_max                          RS   same, ``ReduceOp.MAX``                  no     0    real   none
reduce_scatter_list                                RS   ``split_sizes, dim, group=``            yes    any  gloo   none
funcol_reduce_scatter_single                       RS   ``scatter_dim, group=``                 no     any  gloo   adjoint
funcol_reduce_scatter_tensor                       RS   same (deprecated alias)                 no     any  gloo   adjoint
funcol_reduce_scatter_tensor_autograd              RS   same (deprecated alias)                 no     any  gloo   adjoint
nn_reduce_scatter                                  RS   ``split_sizes, dim, group=``            yes    any  gloo   adjoint
reduce_scatter_to_sequence_parallel_region         RS   ``group=`` (Megatron)                   no     0    all    adjoint
megatron_reduce_scatter_ragged                     RS   ``split_sizes, group=`` (Megatron)      yes    0    all    adjoint
reduce_scatter_last_dim_to_tensor_parallel_region  RS   ``group=`` (Megatron)                   no     -1   all    adjoint
all_to_all_single                                  A2A  *splits*, ``group=``                    yes    0    gloo   none
all_to_all_list                                    A2A  in/out *splits*, ``dim, group=``       yes    any  gloo   none
funcol_all_to_all_single                           A2A  *splits*, ``group=``                    yes    0    gloo   adjoint
funcol_all_to_all_single_autograd                  A2A  *splits*, ``group=``                    yes    0    gloo   adjoint
nn_all_to_all_single                               A2A  *splits*, ``group=``                    yes    0    gloo   adjoint
nn_all_to_all                                      A2A  in/out *splits*, ``dim, group=``       yes    any  gloo   adjoint
megatron_all_to_all                                A2A  *splits*, ``group=`` (Megatron)         yes    0    all    adjoint
deepspeed_all_to_all                               A2A  ``group=`` (DeepSpeed MoE)              no     0    all    adjoint
fairseq_all_to_all                                 A2A  ``group=`` (fairseq MoE)                no     0    all    adjoint
================================================== ==== ======================================= ====== ==== ====== =======

*splits*: ``output_split_sizes, input_split_sizes`` (``None`` for both = equal), as torch orders them;
in/out *splits*: ``input_split_sizes, output_split_sizes``, the list APIs' order.

"gloo" = every dtype gloo moves, complex included (``all_to_all_single``'s docstring:
"Complex tensors are supported"); "all" = the authors state nothing.  ``dims any`` for the
list APIs is the split/cat every caller writes around them (torch's lists take one tensor
per member of any shape); for funcol it is the code (``_chunk_or_narrow_cat``), the
docstrings name no restriction.

Published code is kept as its authors wrote it; the glue, named in each docstring, is only
what a CPU/gloo run and one module need: ``torch.cuda.current_device()`` -> the input's
device (torch+cpu has no CUDA), Megatron's ``parallel_state`` group lookup -> the ``group``
argument (world when ``None``), ``deepspeed.comm`` -> ``torch.distributed`` (which it calls),
branches no harness call can reach (Megatron's global memory buffer and NCCL-stream options,
ONNX ``symbolic``) left out, and the three ``_AllToAll`` classes renamed to live in one
module (their self-references in ``backward`` renamed with them).  Not taken: DeepSpeed-
Ulysses ``_SeqAllToAll`` (``deepspeed/sequence/layer.py``) scatters one dim and gathers
another of a 4-D attention tensor, not this all-to-all; Megatron's ``all_to_all_sp2hp`` /
``hp2sp`` are the same kind of re-layout.

One concern: the published reduce-scatters and all-to-alls, each written to do what its source does.
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
    "megatron_all_to_all",
    "megatron_reduce_scatter_ragged",
    "nn_all_to_all",
    "nn_all_to_all_single",
    "nn_reduce_scatter",
    "reduce_scatter_last_dim_to_tensor_parallel_region",
    "reduce_scatter_list",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "reduce_scatter_tensor_max",
    "reduce_scatter_to_sequence_parallel_region",
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


# -- Megatron-LM: megatron/core/tensor_parallel/mappings.py ---------------------------------------------
#
# NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553 (main, 2026-08-22; the file last
# changed in 60f338a9cd328e71b272c42d6723ebeabb51fef3).  Line numbers below are that file's.
# Megatron picks the collectives once (lines 10-19): torch >= 1.13 gets these two.

dist_all_gather_func = torch.distributed.all_gather_into_tensor
dist_reduce_scatter_func = torch.distributed.reduce_scatter_tensor


def _gather_along_last_dim(input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Megatron lines 84-100, as written but for ``device=``: gather along dim 0, chunk, cat along -1."""

    world_size = group.size()
    # Bypass the function if we are using only 1 GPU.
    if world_size == 1:
        return input_

    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * world_size

    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
    dist_all_gather_func(output, input_.contiguous(), group=group)
    tensor_list = output.chunk(world_size, dim=0)
    output = torch.cat(tensor_list, dim=-1).contiguous()

    return output


def _reduce_scatter_along_last_dim(input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """Megatron lines 103-115, as written: split the last dim, stack the pieces along dim 0, reduce-scatter."""

    world_size = group.size()
    target_shape = list(input_.size())
    target_shape[-1] = target_shape[-1] // world_size
    input_ = input_.reshape(-1, input_.shape[-1])
    split_tensors = torch.split(
        input_, split_size_or_sections=input_.shape[-1] // world_size, dim=1
    )
    concat_tensor = torch.cat(split_tensors, dim=0)
    output = _reduce_scatter_along_first_dim(concat_tensor, group=group).reshape(target_shape)
    return output


def _gather_along_first_dim(
    input_: torch.Tensor, group: dist.ProcessGroup, output_split_sizes: list[int] | None = None
) -> torch.Tensor:
    """Megatron lines 118-156 (``use_global_buffer`` branches left out, ``device=`` the input's).

    "Gather tensors and concatenate along the first dimension ... output_split_sizes: A list
    specifying the sizes of the output splits along the first dimension.  If None, equal
    splitting is assumed."  The ragged branch is ``dist.all_gather`` into views of one buffer.
    """

    assert group is not None, "group should not be None"
    world_size = group.size()
    # Bypass the function if we are using only 1 GPU.
    if world_size == 1:
        return input_

    dim_size = list(input_.size())
    if output_split_sizes is None:
        dim_size[0] = dim_size[0] * world_size

        output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
        dist_all_gather_func(output, input_.contiguous(), group=group)
    else:
        dim_size[0] = sum(output_split_sizes)
        output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
        output_tensor_list = list(torch.split(output, output_split_sizes, dim=0))
        torch.distributed.all_gather(output_tensor_list, input_, group=group)

    return output


def _reduce_scatter_along_first_dim(
    input_: torch.Tensor, group: dist.ProcessGroup, input_split_sizes: list[int] | None = None
) -> torch.Tensor:
    """Megatron lines 159-198 (``use_global_buffer`` branches left out, ``device=`` the input's).

    "Reduce-scatter the input tensor across model parallel group ... input_split_sizes: A
    list specifying the sizes of the input splits along the first dimension for each rank.
    If None, equal splitting is assumed."  The ragged branch is ``dist.reduce_scatter`` of
    ``torch.split`` pieces.
    """
    assert group is not None, "group should not be None"
    world_size = group.size()
    # Bypass the function if we are using only 1 GPU.
    if world_size == 1:
        return input_

    if input_split_sizes is None:
        dim_size = list(input_.size())
        assert (
            dim_size[0] % world_size == 0
        ), "First dimension of the tensor should be divisible by tensor parallel size"

        dim_size[0] = dim_size[0] // world_size

        output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
        dist_reduce_scatter_func(output, input_.contiguous(), group=group)
    else:
        rank = group.rank()
        input_tensor_list = list(torch.split(input_, input_split_sizes, dim=0))

        output = torch.empty_like(input_tensor_list[rank])
        torch.distributed.reduce_scatter(output, input_tensor_list, group=group)
    return output


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """Reduce scatter the input from the model parallel region.

    Megatron lines 355-381; ``symbolic`` (ONNX) and ``use_global_buffer`` left out, so the
    backward returns one ``None`` fewer.
    """

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup,
                input_split_sizes: list[int] | None = None) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        ctx.input_split_sizes = input_split_sizes
        return _reduce_scatter_along_first_dim(input_, group, input_split_sizes)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """Backward function."""
        input_split_sizes = ctx.input_split_sizes
        return (
            _gather_along_first_dim(grad_output, ctx.group, input_split_sizes),
            None,
            None,
        )


class _ReduceScatterToTensorParallelRegion(torch.autograd.Function):
    """Reduce scatter the input from the model parallel region.  Megatron lines 404-421 (``symbolic`` left out)."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        return _reduce_scatter_along_last_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return _gather_along_last_dim(grad_output, ctx.group), None


class _MegatronAllToAll(torch.autograd.Function):
    """Megatron's ``_AllToAll``, lines 424-484 (renamed; ``use_nccl_stream`` left out: its async
    branch only waits at once on an NCCL stream; ``device=`` the input's)."""

    @staticmethod
    def forward(ctx: Any, group: dist.ProcessGroup, input: torch.Tensor,
                output_split_sizes: list[int] | None, input_split_sizes: list[int] | None) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        ctx.output_split_sizes = output_split_sizes
        ctx.input_split_sizes = input_split_sizes

        world_size = group.size()
        # Bypass the function if we are using only 1 GPU.
        if world_size == 1:
            return input

        input = input.contiguous()
        if output_split_sizes is None:
            # Equal split (all2all)
            output = torch.empty_like(input)
        else:
            # Unequal split (all2all-v)
            output = input.new_empty(
                size=[sum(output_split_sizes)] + list(input.size()[1:]),
                dtype=input.dtype,
                device=input.device,
            )
        torch.distributed.all_to_all_single(
            output,
            input,
            output_split_sizes=output_split_sizes,
            input_split_sizes=input_split_sizes,
            group=group,
        )
        return output

    @staticmethod
    def backward(ctx: Any, *grad_output: torch.Tensor) -> tuple[None, torch.Tensor, None, None]:
        """Backward function."""
        return (
            None,
            _MegatronAllToAll.apply(
                ctx.group,
                *grad_output,
                ctx.input_split_sizes,
                ctx.output_split_sizes,
            ),
            None,
            None,
        )


def reduce_scatter_to_sequence_parallel_region(
    input_: torch.Tensor, group: dist.ProcessGroup | None = None, input_split_sizes: list[int] | None = None
) -> torch.Tensor:
    """Megatron's public wrapper, lines 536-543: "forward: RS, backward AG <fisrt dim>".

    Claim (its helpers' docstrings): reduce-scatter along dim 0, equal slots when
    ``input_split_sizes`` is None, else one slot per rank of the given lengths; backward
    gathers the cotangents along dim 0 (the **adjoint**).  One rank: returns ``input_``.
    Glue: ``get_tensor_model_parallel_group_if_none(group)`` (Megatron's ``parallel_state``
    tensor-parallel group when None) -> the given group, the world when None;
    ``use_global_buffer`` left out.  As a harness target this is the equal form: Megatron
    calls the slot lengths ``input_split_sizes``, the harness's all-to-all name; see
    :func:`megatron_reduce_scatter_ragged`.  Measured: values and gradients correct, every case.
    """
    return _ReduceScatterToSequenceParallelRegion.apply(input_, _pg(group), input_split_sizes)


def megatron_reduce_scatter_ragged(
    x: torch.Tensor, split_sizes: list[int], group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """:func:`reduce_scatter_to_sequence_parallel_region` with ``input_split_sizes=split_sizes``.

    Adapter (renaming only): Megatron's ``input_split_sizes`` of a reduce-scatter are the
    per-member slot lengths, which the harness passes as ``split_sizes``.  Ragged, dim 0;
    forward ``dist.reduce_scatter`` of ``torch.split`` pieces, backward ``dist.all_gather``
    of differently sized cotangents into views of one buffer (``_gather_along_first_dim``).
    Measured: values correct (ragged included); the ragged backward raises
    "ProcessGroupGloo::allgather: invalid tensor size" (gloo gathers equal sizes only; NCCL does
    uneven lists), equal slots correct.
    """
    return reduce_scatter_to_sequence_parallel_region(x, group, input_split_sizes=split_sizes)


def reduce_scatter_last_dim_to_tensor_parallel_region(
    input_: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Megatron's public wrapper, lines 552-555: "forward: RS, backward AG: AG <last dim>".

    Reduce-scatter along the **last** dim, equal slots (``shape[-1] // world_size`` each):
    the last dim is split into ``world_size`` pieces stacked along dim 0 and reduce-scattered
    there; backward gathers along dim 0 and concatenates the chunks along -1 (the **adjoint**).
    No single-rank bypass in the forward.  Glue: the group lookup, as
    :func:`reduce_scatter_to_sequence_parallel_region`.  Measured: values and gradients correct
    for equal slots; a zero-length last dim raises "cannot reshape tensor of 0 elements into
    shape [-1, 0]" (``input_.reshape(-1, input_.shape[-1])``) on every rank, W = 1 included.
    """
    return _ReduceScatterToTensorParallelRegion.apply(input_, _pg(group))


def megatron_all_to_all(
    x: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Megatron's ``_AllToAll.apply(group, x, output_split_sizes, input_split_sizes)``.

    Claim (lines 439-448): "Equal split (all2all)" when ``output_split_sizes`` is None,
    "Unequal split (all2all-v)" otherwise; dim 0; backward is the all-to-all with the split
    sizes swapped (the **adjoint**).  One rank: returns ``input``.  Adapter: the published API
    takes the group first (``forward(ctx, group, input, ...)``; its wrapper ``all_to_all(group,
    input_, output_split_sizes_, ...)``, lines 558-563, asserts a group), the harness passes
    ``x`` first; ``None`` = the world.  Measured: values and gradients correct, every case
    (ragged, empty, non-contiguous, complex, the subgroup).
    """
    return _MegatronAllToAll.apply(_pg(group), x, output_split_sizes, input_split_sizes)


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
