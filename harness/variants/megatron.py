"""Megatron-LM's tensor-parallel mappings, as written: its gathers, reduce-scatters, all-to-all and all-reduce.

``megatron/core/tensor_parallel/mappings.py`` at the commit named below, and
``split_tensor_along_last_dim`` from ``tensor_parallel/utils.py``.  Glue: the group lookup
(``parallel_state``) becomes the ``group`` argument (the world when ``None``),
``torch.cuda.current_device()`` the input's device; ``symbolic`` (ONNX) and the global memory
buffer are left out.  One concern: one upstream file as written, kept in one module so that it reads
as that file does, its seven mappings side by side.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from harness.variants.torch_paths import _pg

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


def divide(numerator: int, denominator: int) -> int:
    """Megatron's ``core/utils.py`` ``divide``: the quotient of an exact division."""
    assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
    return numerator // denominator


def split_tensor_along_last_dim(
    tensor: torch.Tensor, num_partitions: int, contiguous_split_chunks: bool = False
) -> tuple[torch.Tensor, ...]:
    """``tensor_parallel/utils.py``: split a tensor along its last dimension into equal pieces."""
    last_dim = tensor.dim() - 1
    last_dim_size = divide(tensor.size()[last_dim], num_partitions)
    tensor_list = torch.split(tensor, last_dim_size, dim=last_dim)
    if contiguous_split_chunks:
        return tuple(chunk.contiguous() for chunk in tensor_list)
    return tensor_list


def _split_along_last_dim(input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """``mappings.py`` ``_split_along_last_dim``: this rank's piece of the last dim."""
    world_size = group.size()
    # Bypass the function if we are using only 1 GPU.
    if world_size == 1:
        return input_
    input_list = split_tensor_along_last_dim(input_, world_size)
    rank = group.rank()
    output = input_list[rank].contiguous()
    return output


class _GatherFromModelParallelRegion(torch.autograd.Function):
    """Gather the input from model parallel region and concatinate."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        return _gather_along_last_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return _split_along_last_dim(grad_output, ctx.group), None


def gather_from_tensor_model_parallel_region(
    input_: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Megatron's public wrapper: "forward: AG <last dim>, backward: split <last dim>".

    Measured: values and gradients right for equal shapes on any group; a zero-length last dim
    makes the backward raise (``torch.split`` of a 0-long dim into 0-long pieces gives one piece,
    not W, and ``input_list[rank]`` is out of range on every rank but the first).
    """
    return _GatherFromModelParallelRegion.apply(input_, _pg(group))


class _AllGatherFromTensorParallelRegion(torch.autograd.Function):
    """Gather the input from model parallel region and concatenate."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        return _gather_along_last_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return _reduce_scatter_along_last_dim(grad_output, ctx.group), None


def all_gather_last_dim_from_tensor_parallel_region(
    input_: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """Megatron's public wrapper: "forward: AG <last dim>, backward: RS <last dim>" (the ``sum`` contract).

    Measured: values and gradients right for equal shapes on any group; a zero-length last dim
    makes the backward raise (``reshape(-1, 0)`` in ``_reduce_scatter_along_last_dim``).
    """
    return _AllGatherFromTensorParallelRegion.apply(input_, _pg(group))


# -- the all-reduce: _reduce and reduce-from-region, as at 00caa53af30912914981c86f39db123961678bbd ------


def _reduce(input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """``mappings.py`` ``_reduce``, as written: all-reduce ``input_.contiguous()`` and return ``input_``
    (the caller's tensor, written in place when it is contiguous; a copy is reduced, and dropped, when not)."""
    assert group is not None, "group should not be None"

    # Bypass the function if we are using only 1 GPU.
    if group.size() == 1:
        return input_

    # All-reduce.
    torch.distributed.all_reduce(input_.contiguous(), group=group)

    return input_


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce the input from the model parallel region."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        return _reduce(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return grad_output, None


def reduce_from_tensor_model_parallel_region(input_: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's public wrapper: "forward: all reduce, backward copy" (the ``identity`` contract)."""
    return _ReduceFromModelParallelRegion.apply(input_, _pg(group))


def _split_along_first_dim(input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    """``mappings.py`` ``_split_along_first_dim``, as written: this rank's equal piece of dim 0."""
    assert group is not None, "group should not be None"

    world_size = group.size()
    # Bypass the function if we are using only 1 GPU.
    if world_size == 1:
        return input_

    # Split along first dimension.
    dim_size = input_.size()[0]
    assert (
        dim_size % world_size == 0
    ), "First dimension of the tensor should be divisible by tensor parallel size"
    local_dim_size = dim_size // world_size
    rank = group.rank()
    dim_offset = rank * local_dim_size

    output = input_[dim_offset : dim_offset + local_dim_size].contiguous()

    return output


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Pass the input to the model parallel region."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return _reduce(grad_output, ctx.group), None


class _ScatterToModelParallelRegion(torch.autograd.Function):
    """Split the input and keep only the corresponding chuck to the rank."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        return _split_along_last_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return _gather_along_last_dim(grad_output, ctx.group), None


class _ScatterToSequenceParallelRegion(torch.autograd.Function):
    """Split the input and keep only the corresponding chuck to the rank."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        """Forward function."""
        ctx.group = group
        return _split_along_first_dim(input_, group)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Backward function."""
        return _gather_along_first_dim(grad_output, ctx.group), None


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """Gather the input from sequence parallel region and concatinate (``use_global_buffer`` left out)."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, group: dist.ProcessGroup, tensor_parallel_output_grad: bool = True,
                output_split_sizes: list[int] | None = None) -> torch.Tensor:
        """Forward function."""
        ctx.tensor_parallel_output_grad = tensor_parallel_output_grad
        ctx.group = group
        ctx.output_split_sizes = output_split_sizes
        return _gather_along_first_dim(input_, group, output_split_sizes)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """Backward function."""
        tensor_parallel_output_grad = ctx.tensor_parallel_output_grad

        # If the computation graph after the gather operation is
        # in the tensor parallel mode, output gradients need to reduce
        # scattered and whereas if the computation is duplicated,
        # output gradients need to be scattered.
        if tensor_parallel_output_grad:
            return (_reduce_scatter_along_first_dim(grad_output, ctx.group, ctx.output_split_sizes), None, None, None)
        else:
            assert ctx.output_split_sizes is None
            return (_split_along_first_dim(grad_output, ctx.group), None, None, None)


def copy_to_tensor_model_parallel_region(input_: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's public wrapper: "forward: copy, backward allreduce" (the copy's ``sum`` contract)."""
    return _CopyToModelParallelRegion.apply(input_, _pg(group))


def scatter_to_tensor_model_parallel_region(input_: torch.Tensor,
                                            group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's public wrapper: "forward: RS, backward: AG <last dim>" (a split of the last dim, adjoint)."""
    return _ScatterToModelParallelRegion.apply(input_, _pg(group))


def scatter_to_sequence_parallel_region(input_: torch.Tensor,
                                        group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's public wrapper: "forward: split <first dim>, backward: AG <first dim>"."""
    return _ScatterToSequenceParallelRegion.apply(input_, _pg(group))


def gather_from_sequence_parallel_region(input_: torch.Tensor, tensor_parallel_output_grad: bool = True,
                                         group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Megatron's public wrapper: "forward: AG, backward: RS <first dim>" (``sum``; ``local`` with
    ``tensor_parallel_output_grad=False``, whose backward splits)."""
    return _GatherFromSequenceParallelRegion.apply(input_, _pg(group), tensor_parallel_output_grad)
