"""A tensor-parallel gather of the last dim, as Megatron-LM's ``mappings.py`` and its copies write it.

``gather_from_tensor_model_parallel_region(x, group)`` takes no dim: it always gathers the last
one, and its backward keeps this rank's piece of the cotangent (``--grad local``).  Its helpers
live in the sibling module ``tp_utils.py``, imported as ``python mappings.py`` would import it.
Checked as written (the probe finds the dim)::

    python -m harness check examples/tensor_parallel/mappings.py:gather_from_tensor_model_parallel_region --no-ragged --grad local

``gather_global_rank_backward`` is its buggy twin: its backward keeps the piece of the *global*
rank, which is the group rank only when the group is the world (found on a subgroup)::

    python -m harness check examples/tensor_parallel/mappings.py:gather_global_rank_backward --no-ragged --grad local
"""

import torch
import torch.distributed as dist
from tp_utils import gather_along_last_dim, split_along_last_dim


class _GatherFromModelParallelRegion(torch.autograd.Function):
    """Forward: all-gather along the last dim; backward: this rank's piece of the last dim."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return gather_along_last_dim(x, group)

    @staticmethod
    def backward(ctx, grad_output):
        return split_along_last_dim(grad_output, ctx.group), None


class _GatherGlobalRankBackward(_GatherFromModelParallelRegion):
    """The same forward; the backward takes the global rank's piece (a bug on any subgroup)."""

    @staticmethod
    def backward(ctx, grad_output):
        return split_along_last_dim(grad_output, ctx.group, rank=dist.get_rank()), None


def gather_from_tensor_model_parallel_region(x, group=None):
    """Gather ``x`` from every rank of ``group`` along the last dim (tensor-parallel activations)."""
    return _GatherFromModelParallelRegion.apply(x, group)


def gather_global_rank_backward(x, group=None):
    """As :func:`gather_from_tensor_model_parallel_region`, with the global rank in its backward."""
    return _GatherGlobalRankBackward.apply(x, group)
