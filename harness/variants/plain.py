"""Plain ``dist.all_gather`` into a list, with and without the "put the local tensor back" trick."""

from __future__ import annotations

import torch
import torch.distributed as dist

from harness.variants._collectives import all_gather_list


def gather_equal(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The textbook gather (MoCo's ``concat_all_gather`` and countless copies).

    ``dist.all_gather`` into a list of ``torch.empty_like(x)`` and ``torch.cat`` the list.
    Equal shapes on every rank, no gradient (``dist.all_gather`` is not differentiable).
    """
    return torch.cat(all_gather_list(x, dist.get_world_size(), torch.empty_like), dim=dim)


def gather_local_trick(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Gather under ``torch.no_grad()``, then ``all_x[rank] = x`` so the local slot carries grad.

    A widespread fix for "all_gather has no gradient" (e.g. in contrastive-learning repos and
    forum answers).  Its authors claim the local gradient: rank r's input gets the cotangent
    of its own slot and nothing from other ranks.
    """
    with torch.no_grad():
        all_x = all_gather_list(x, dist.get_world_size())
    all_x[dist.get_rank()] = x
    return torch.cat(all_x, dim=dim)
