"""Single-buffer gathers: ``dist.all_gather_into_tensor`` and its successor ``all_gather_single``.

Both write every rank's tensor into one ``[W*n, ...]`` output along dim 0 and require equal
shapes.  The adapters move ``dim`` to the front (``movedim`` + ``contiguous``), gather, and
move it back; no gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

Collective = Callable[[torch.Tensor, torch.Tensor], object]


def gather_into_tensor(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``dist.all_gather_into_tensor(out, x)``; deprecated in torch 2.13 for all_gather_single."""
    return _gather_front(x, dim, dist.all_gather_into_tensor)


def gather_single(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``dist.all_gather_single(out, x)``, torch 2.13's name for the same collective."""
    return _gather_front(x, dim, dist.all_gather_single)


def _gather_front(x: torch.Tensor, dim: int, collective: Collective) -> torch.Tensor:
    """Move ``dim`` to the front, gather into a ``[W*n, ...]`` buffer, move it back."""
    front = x.movedim(dim, 0).contiguous()
    out = front.new_empty((dist.get_world_size() * front.shape[0], *front.shape[1:]))
    collective(out, front)
    return out.movedim(0, dim)
