"""Adapters for gathers shipped with torch that need more than a gather call gives.

``torch.distributed.nn.functional.all_gather`` needs none: the catalogue calls it as written.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def all_gather_object(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``dist.all_gather_object`` of the tensor itself, then ``cat`` along ``dim``.

    Pickles every rank's tensor, so shapes may differ; no gradient.
    """
    gathered: list[torch.Tensor | None] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, x)
    return torch.cat(gathered, dim=dim)  # type: ignore[arg-type]


def functional_autograd(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``_functional_collectives.all_gather_tensor_autograd(x, gather_dim=dim, group=WORLD)``.

    Deprecated in torch 2.13 for ``all_gather_single_autograd``, which it calls.  Its backward
    is a ``reduce_scatter_tensor`` with sum (the *sum* contract); the docstring says only
    ``gather_dim=0`` is supported and all ranks must hold equal shapes.
    """
    out = funcol.all_gather_tensor_autograd(x, gather_dim=dim, group=dist.group.WORLD)  # type: ignore[arg-type]
    # An AsyncCollectiveTensor until first use; wait so callers get a plain tensor (autograd kept).
    return funcol.wait_tensor(out) if isinstance(out, funcol.AsyncCollectiveTensor) else out
