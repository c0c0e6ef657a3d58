"""Helpers ``mappings.py`` imports as a sibling module, as tensor-parallel code keeps them beside it."""

import torch
import torch.distributed as dist


def split_along_last_dim(x, group, rank=None):
    """This rank's equal piece of the last dim (``rank``: its group rank, unless given)."""
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return x
    pieces = torch.tensor_split(x, world_size, dim=-1)  # W pieces, even of a zero-length dim
    return pieces[dist.get_rank(group) if rank is None else rank].contiguous()


def gather_along_last_dim(x, group):
    """Every rank's ``x`` concatenated along the last dim: gathered along dim 0 into one buffer,
    then its chunks concatenated (what Megatron-LM's ``_gather_along_last_dim`` does)."""
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return x
    size = list(x.size())
    size[0] *= world_size
    out = torch.empty(size, dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return torch.cat(out.chunk(world_size, dim=0), dim=-1).contiguous()
