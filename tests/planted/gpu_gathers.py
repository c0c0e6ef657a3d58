"""Gathers for the GPU self-tests (``tests/test_gpu.py``); ranks import them by ``module:attr``.

``device_ragged`` is a correct ragged gather that keeps every tensor on the input's device,
so it runs on nccl and on gloo with CUDA tensors alike.  ``cpu_collective`` is the same
gather fed CPU tensors, a common porting bug: fine on gloo, refused by nccl.
``device_assert_last_rank`` indexes out of bounds on the last rank after a correct gather: on
CUDA a device-side assert, which leaves that process's CUDA context unusable for good.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def device_ragged(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Exchange lengths, pad to the longest, all_gather, unpad: all on ``x.device``."""
    world = dist.get_world_size()
    front = x.movedim(dim, 0)
    length = torch.tensor([front.shape[0]], dtype=torch.int64, device=x.device)
    lengths = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(lengths, length)
    counts = [int(n) for n in lengths]
    padded = front.new_zeros((max(counts), *front.shape[1:]))
    padded[: front.shape[0]] = front
    pieces = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(pieces, padded)
    return torch.cat([piece[:n] for piece, n in zip(pieces, counts)]).movedim(0, dim)


def cpu_collective(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The same gather on a CPU copy of ``x``, moved back afterwards: nccl refuses the CPU tensors."""
    return device_ragged(x.cpu(), dim).to(x.device)


def device_assert_last_rank(x: torch.Tensor, dim: int) -> torch.Tensor:
    """A correct gather, then an out-of-bounds index on the last rank (the only one at W=1):
    an ``IndexError`` on the CPU, a device-side assert on CUDA, after which every CUDA call of
    that process fails, so its ranks must not run another case."""
    out = device_ragged(x, dim)
    if dist.get_rank() == dist.get_world_size() - 1:
        one = torch.zeros(1, device=x.device)
        one[torch.tensor([2], device=x.device)].item()
    return out
