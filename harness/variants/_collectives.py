"""The one collective idiom nearly every published variant repeats, shared so it is written once.

Published code builds a list of ``world_size`` buffers shaped like the local tensor and calls
``dist.all_gather`` into it; the only difference between authors is whether the buffers come
from ``torch.zeros_like`` or ``torch.empty_like``, so that is a parameter.  Anything beyond
that (how sizes are exchanged, how padding is removed) stays in the variant's own module, so
each variant keeps its own flaws.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist


def all_gather_list(
    t: torch.Tensor,
    world_size: int,
    like: Callable[[torch.Tensor], torch.Tensor] = torch.zeros_like,
) -> list[torch.Tensor]:
    """``dist.all_gather`` of ``t`` into ``world_size`` fresh buffers made by ``like(t)``.

    Equal shapes on every rank are assumed, exactly as in the published code: nothing is
    checked, so ragged input fails (or hangs) inside the collective.
    """
    out = [like(t) for _ in range(world_size)]
    dist.all_gather(out, t)
    return out
