"""A SimCLR-style ``GatherLayer``: an autograd.Function returning a tuple of per-rank tensors.

Checked as written (output convention ``list``; it takes only ``x``, so dim 0)::

    python -m harness check examples/gather_layer.py:GatherLayer --no-ragged --grad local
"""

import torch
import torch.distributed as dist


class GatherLayer(torch.autograd.Function):
    """Gather equal-shaped tensors from every rank; backward keeps this rank's own cotangent (local)."""

    @staticmethod
    def forward(ctx, x):
        gathered = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, x.contiguous())
        return tuple(gathered)

    @staticmethod
    def backward(ctx, *grads):
        return grads[dist.get_rank()].clone()
