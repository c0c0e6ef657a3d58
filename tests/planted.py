"""Planted variants for the pool's fault self-tests: each misbehaves in exactly one way.

They follow the ``gather(x, dim)`` convention so the pool runs them like any variant.
"""

from __future__ import annotations

import ctypes
import os
import time

import torch
import torch.distributed as dist


def simple_ragged(x: torch.Tensor, dim: int) -> torch.Tensor:
    """A correct ragged gather in two collectives (sizes, then padded data); no autograd."""
    world = dist.get_world_size()
    moved = x.movedim(dim, 0)
    length = torch.tensor([moved.shape[0]], dtype=torch.int64)
    sizes = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(sizes, length)
    longest = max(int(s) for s in sizes)
    padded = torch.zeros((longest,) + tuple(moved.shape[1:]), dtype=x.dtype)
    padded[: moved.shape[0]] = moved
    pieces = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(pieces, padded)
    return torch.cat([p[: int(s)] for p, s in zip(pieces, sizes)]).movedim(0, dim)


def _on_rank_one(action) -> None:
    if dist.get_rank() == 1:
        action()


def hang_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 never returns (sleeps), so the others block in the gather."""
    _on_rank_one(lambda: time.sleep(10_000))
    return simple_ragged(x, dim)


def abort_mismatch(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Unpadded ``all_gather`` of ragged tensors: gloo aborts one rank on the size mismatch."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x)
    return torch.cat(pieces, dim)


def segfault_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 dereferences NULL."""
    _on_rank_one(lambda: ctypes.string_at(0))
    return simple_ragged(x, dim)


def exit_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 calls ``os._exit(3)``."""
    _on_rank_one(lambda: os._exit(3))
    return simple_ragged(x, dim)


def raise_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 raises before the gather; the others block in it."""

    def fail() -> None:
        raise ValueError("planted failure on rank 1")

    _on_rank_one(fail)
    return simple_ragged(x, dim)


def desync_extra_collective(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 0 adds an all_reduce the other ranks never enter."""
    if dist.get_rank() == 0:
        dist.all_reduce(torch.zeros(1))
    return simple_ragged(x, dim)


def killed_by_sigkill_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 is killed from outside (here: by itself) with SIGKILL."""
    _on_rank_one(lambda: os.kill(os.getpid(), 9))
    return simple_ragged(x, dim)
