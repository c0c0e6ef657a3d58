"""Planted gathers written in every calling convention: buggy ones the harness must catch
without glue, and targets that fit no convention (the probe's misfit table).

The correct counterparts are the README's examples (``examples/``); each bug here is one
departure from the way published code of that convention is written.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from harness.ragged import all_gather_ragged

# -- one bug per output convention ----------------------------------------------------------------


class ReversedGatherLayer(torch.autograd.Function):
    """list: a GatherLayer whose tuple lists the ranks in reverse order."""

    @staticmethod
    def forward(ctx, x):
        gathered = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, x.contiguous())
        return tuple(reversed(gathered))

    @staticmethod
    def backward(ctx, *grads):
        return grads[dist.get_world_size() - 1 - dist.get_rank()].clone()


def unstacked_on_one_rank(x):
    """stack: Lightning's early return: with one rank the input comes back without the stack dim."""
    if dist.get_world_size() == 1:
        return x
    out = x.new_empty(dist.get_world_size() * x.numel())
    dist.all_gather_into_tensor(out, x.contiguous().reshape(-1))
    return out.view(dist.get_world_size(), *x.shape)


def sizes_right_data_short(x, dim=0):
    """first: the sizes are right, but the gathered tensor drops the last rank's piece."""
    sizes = [None] * dist.get_world_size()
    dist.all_gather_object(sizes, x.shape[dim])
    gathered = all_gather_ragged(x, dim)
    return gathered.narrow(dim, 0, gathered.shape[dim] - sizes[-1]), torch.tensor(sizes)


@torch.no_grad()
def aliased_buffers(tensor):
    """x-only: ``[torch.zeros_like(tensor)] * W`` is one buffer W times: every piece is the last rank's."""
    tensors_gather = [torch.zeros_like(tensor)] * dist.get_world_size()
    dist.all_gather(tensors_gather, tensor.contiguous())
    return torch.cat(tensors_gather, dim=0)


class AllGatherWithGrad(torch.autograd.Function):
    """The common "all_gather with grad" Function (Lightning's ``_AllGather`` in lightning_lite and
    fabric; sentence-transformers-style contrastive code): stack over ``group``, backward takes
    ``grad_output[dist.get_rank()]`` -- the *global* rank, written for the world group and wrong
    whenever it differs from the rank within the group (out of range on a small subgroup)."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        gathered = [torch.zeros_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, tensor.contiguous(), group=group)
        return torch.stack(gathered)

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.contiguous()
        dist.all_reduce(grad_output, group=ctx.group)
        return grad_output[dist.get_rank()], None


def global_rank_on_subgroup(x, group=None):
    """group=: the Lightning lineage's subgroup bug (checked with ``--groups``)."""
    return AllGatherWithGrad.apply(x, group if group is not None else dist.group.WORLD)


def ignores_group(x, dim=0, group=None):
    """group=: takes a group and gathers over the whole world anyway."""
    return all_gather_ragged(x, dim)


def name_error_at_two_ranks(x, dim):
    """A published gather that raises inside its own code once W >= 2 (lucidrains' musiclm)."""
    if dist.get_world_size() > 1:
        return undefined_helper(x, dim)  # noqa: F821  (the published bug)
    return all_gather_ragged(x, dim)


# -- targets no convention fits -----------------------------------------------------------------


def needs_extra_argument(x, dim, world_size):
    return all_gather_ragged(x, dim)


def returns_dict(x, dim):
    return {"gathered": all_gather_ragged(x, dim)}


def per_rank_list(x, dim):
    """A correct ``list`` gather (equal shapes): misread only when declared ``--output tensor``."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    return pieces


class NotAFunction:
    """A class the harness cannot construct (an nn.Module class needing arguments, say)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim


NOT_CALLABLE = 42


def no_group(x, dim):
    return all_gather_ragged(x, dim)
