"""Lightning's ``_all_gather_ddp_if_available(tensor, group=None, sync_grads=False)``: a stack
whose gradient flows only when the caller passes ``sync_grads=True``, as training code does::

    python -m harness check examples/sync_grads.py:all_gather --grad sum --kwarg sync_grads=True

The group is optional: each case calls it with the world group or without one.
"""

import torch
import torch.distributed as dist


class _AllGatherGrad(torch.autograd.Function):
    """Stack every rank's ``tensor``; backward sums the cotangents and keeps this rank's slice."""

    @staticmethod
    def forward(ctx, tensor, group=None):
        ctx.group = group
        world = dist.get_world_size(group)
        flat = tensor.new_empty(world * tensor.numel())
        dist.all_gather_into_tensor(flat, tensor.contiguous().reshape(-1), group=group)
        return flat.view(world, *tensor.shape)

    @staticmethod
    def backward(ctx, grad_output):
        summed = grad_output.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(summed, group=ctx.group)
        return summed[dist.get_rank(ctx.group)], None


def all_gather(tensor, group=None, sync_grads=False):
    """Every rank's ``tensor`` stacked along a new first dim; differentiable with ``sync_grads=True``."""
    if sync_grads:
        return _AllGatherGrad.apply(tensor, group)
    with torch.no_grad():
        return _AllGatherGrad.apply(tensor, group)
