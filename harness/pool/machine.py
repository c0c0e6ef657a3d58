"""What this machine can host: local ranks by memory, GPUs by backend, the groups' own timeout.

Checked twice with the same numbers: on the options before anything starts
(:func:`check_machine`, a usage error naming the option) and by the pool before it starts a
rank set (:func:`check_devices`, a harness error: a programmatic caller asked for it).
"""

from __future__ import annotations

import torch

from harness.core.contract import MAX_WORLD_SIZE
from harness.core.errors import PoolError, UsageError
from harness.settings.options import COMPILE_PATIENCE, PATIENCE

#: Resident memory of one warm rank (torch 2.13, gloo, CPU box: 240 MB measured, 216 MB of it
#: anonymous): what bounds how many local ranks a machine holds.
RANK_MEMORY_BYTES = 256 * 2**20




def local_world_size_limit() -> int:
    """The most rank processes this machine holds at once: available memory over
    :data:`RANK_MEMORY_BYTES`, at most ``MAX_WORLD_SIZE`` (torchrun ranks go further)."""
    try:
        with open("/proc/meminfo") as meminfo:
            available_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 8  # no /proc: the world sizes every laptop holds
    return max(1, min(MAX_WORLD_SIZE, available_kb * 1024 // RANK_MEMORY_BYTES))


def too_many_ranks(world_size: int, limit: int) -> str:
    return (f"{world_size} local ranks do not fit on this machine: it holds at most {limit} (each warm rank takes "
            f"about {RANK_MEMORY_BYTES >> 20} MB of the memory available); use a smaller --world-sizes, or serve "
            f"the cases to torchrun ranks with --listen")


#: A process group never times out sooner than this.
GROUP_TIMEOUT_FLOOR_S = 3600.0


def group_timeout_s(case_timeout_s: float) -> float:
    """The process group's own timeout: far beyond the case timeout, so that the controller,
    not the backend, decides when a rank hangs (and can dump its stack first), however long
    it lets busy or compiling ranks run (:data:`harness.settings.options.PATIENCE`, ``COMPILE_PATIENCE``)."""
    return max(GROUP_TIMEOUT_FLOOR_S, (max(PATIENCE, COMPILE_PATIENCE) + 1) * case_timeout_s)


def within_gpus(world_sizes: tuple[int, int], backend: str) -> tuple[int, int]:
    """A default range of world sizes, capped for nccl at the GPUs torch sees (one per rank):
    what a command uses when no ``--world-sizes`` was given."""
    low, high = world_sizes
    if backend == "nccl":
        high = max(low, min(high, torch.cuda.device_count()))
    return low, high


def check_devices(backend: str, device: str, world_size: int) -> None:
    """Refuse a set this machine cannot host, before starting ranks that would fail obscurely."""
    if backend == "nccl" and device != "cuda":
        raise PoolError(f"an nccl group needs device=cuda, not device={device}")
    if device != "cuda":
        return
    count = torch.cuda.device_count()
    if count == 0:
        raise PoolError(f"device=cuda: torch {torch.__version__} sees no CUDA device")
    if backend == "nccl" and world_size > count:
        raise PoolError(f"an nccl group of {world_size} ranks needs {world_size} GPUs, and torch sees {count}")


def check_machine(backend: str, device: str, world_sizes: tuple[int, int], *, local: bool = True) -> None:
    """The options' verdict on this machine, before anything starts: a :class:`UsageError` naming
    the option that does not fit (``local=False``: torchrun ranks, only backend and device checked)."""
    limit = local_world_size_limit()
    if local and world_sizes[1] > limit:
        raise UsageError(f"--world-sizes {world_sizes[0]}-{world_sizes[1]}: {too_many_ranks(world_sizes[1], limit)}")
    if backend == "nccl" and device != "cuda":
        raise UsageError("--backend nccl: nccl moves CUDA tensors only; add --device cuda, or use --backend gloo")
    if not local or device != "cuda":
        return
    count = torch.cuda.device_count()
    if count == 0:
        raise UsageError(f"--device cuda: no CUDA device is visible to torch {torch.__version__} "
                         "(torch.cuda.device_count() == 0); use --backend gloo --device cpu")
    low, high = world_sizes
    if backend == "nccl" and high > count:
        raise UsageError(f"--world-sizes {low}-{high}: nccl needs one GPU per rank and torch sees {count}; "
                         f"use --world-sizes {min(low, count)}-{count}")
