"""Pad-to-max gathers as pasted on StackOverflow and the PyTorch forums.

All three exchange the local shapes, zero-pad every rank's tensor to the longest one along
dim 0, ``dist.all_gather`` the padded tensors and then drop the padding again.  They differ
only in the last step (by recorded size, or by value) and in how many dims they handle.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from harness.variants._collectives import all_gather_list


def all_gather(q: torch.Tensor, ws: int, device: torch.device) -> list[torch.Tensor]:
    """The 1-D helper of StackOverflow answer 71433508 ("tensor arrays of different lengths").

    Gathers ``torch.tensor(q.size())`` from every rank, pads ``q`` with zeros to the largest
    size and slices each gathered tensor back with ``t[:size]``.  ``local_size.item()`` only
    works for 1-D ``q``; an N-d tensor fails there.
    """
    local_size = torch.tensor(q.size(), device=device)
    all_sizes = all_gather_list(local_size, ws)
    max_size = max(all_sizes)
    q = _pad_rows(q, max_size.item() - local_size.item())
    return [t[:size] for t, size in zip(all_gather_list(q, ws), all_sizes)]


def all_gather_nd(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The N-d extension pasted alongside it ("the length dimension is 0").

    Same algorithm, but the padding and the slicing use the first entry of each gathered
    shape, so extra dims are carried along; they must be equal on every rank.
    """
    padded, all_sizes = _padded_nd(tensor)
    return [t[: size[0]] for t, size in zip(padded, all_sizes)]


def all_gather_unpad_by_value(tensor: torch.Tensor) -> list[torch.Tensor]:
    """The common rewrite that removes padding by value instead of by recorded size.

    After gathering the zero-padded tensors it keeps the rows that are not all zero, the
    row-wise form of the forum idiom ``t[t != 0]`` (identical to it for 1-D input).
    """
    padded, _ = _padded_nd(tensor)
    return [t[_nonzero_rows(t)] for t in padded]


def gather_1d(x: torch.Tensor) -> list[torch.Tensor]:
    """Adapter: :func:`all_gather` with the world size and device it asks for (its list as returned)."""
    return all_gather(x, dist.get_world_size(), x.device)


def _padded_nd(tensor: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Exchange full shapes, zero-pad dim 0 to the longest, gather: (padded tensors, shapes)."""
    world_size = dist.get_world_size()
    local_size = torch.tensor(tensor.size(), device=tensor.device)
    all_sizes = all_gather_list(local_size, world_size)
    max_length = max(size[0] for size in all_sizes)
    tensor = _pad_rows(tensor, max_length.item() - local_size[0].item())
    return all_gather_list(tensor, world_size), all_sizes


def _pad_rows(t: torch.Tensor, n: int | float) -> torch.Tensor:
    """Append ``n`` zero rows along dim 0 with ``torch.cat``; ``t`` itself if ``n == 0``."""
    if not n:
        return t
    padding = torch.zeros((int(n), *t.shape[1:]), device=t.device, dtype=t.dtype)
    return torch.cat((t, padding))


def _nonzero_rows(t: torch.Tensor) -> torch.Tensor:
    """Boolean mask over dim 0: rows holding at least one non-zero element."""
    return (t != 0).reshape(t.shape[0], math.prod(t.shape[1:])).any(dim=1)
