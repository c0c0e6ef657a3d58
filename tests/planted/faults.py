"""Planted faults for the pool's self-tests: each misbehaves in exactly one way on top of a correct gather.

They follow the ``gather(x, dim)`` convention so the pool runs them like any variant.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

import torch
import torch.distributed as dist

from harness.ragged import all_gather_ragged


def correct(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The project's one correct ragged gather (two collectives forward), which every fault wraps."""
    return all_gather_ragged(x, dim)


def _on_rank_one(action) -> None:
    if dist.get_rank() == 1:
        action()


def _on_last_rank(action) -> None:
    """The last rank: the only one at W=1, the one world size NCCL has on one GPU."""
    if dist.get_rank() == dist.get_world_size() - 1:
        action()


def hang_last_rank(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The last rank gathers, then waits for an event nobody sets: a hang at any world size."""
    out = correct(x, dim)
    _on_last_rank(lambda: threading.Event().wait())
    return out


def segfault_last_rank(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The last rank gathers, then dereferences NULL: a crash at any world size."""
    out = correct(x, dim)
    _on_last_rank(lambda: ctypes.string_at(0))
    return out


def hang_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 never returns (sleeps), so the others block in the gather."""
    _on_rank_one(lambda: time.sleep(10_000))
    return correct(x, dim)


SLOW_S = 2.0


def slow_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """A stand-in for a machine that starves a rank: rank 1 computes for :data:`SLOW_S` first
    (busy, never asleep), then gathers correctly.  Slow, not stuck: not a hang."""
    _on_rank_one(lambda: _spin(SLOW_S))
    return correct(x, dim)


def naps_on_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 sleeps 0.1 s, then gathers correctly: every rank asleep for a while on every case,
    a batch of such cases longer than one case's timeout, and never a hang."""
    _on_rank_one(lambda: time.sleep(0.1))
    return correct(x, dim)


def spins_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 spins forever (busy, never asleep): a hang all the same, found once its patience is spent."""
    _on_rank_one(lambda: _spin(10_000))
    return correct(x, dim)


def spins_while_rank1_raises(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 raises at once; rank 0 spins forever outside any collective: busy, so neither the
    ledgers nor the settle can end the wait, and only the patience does."""
    if dist.get_rank() == 1:
        raise ValueError("planted failure on rank 1")
    if dist.get_rank() == 0:
        _spin(10_000)
    return correct(x, dim)


def rank0_slow_then_gathers(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 0 computes for :data:`SLOWED_S` before its first gather (busy: a slowed case, not a
    hang); the others wait for it inside the gather, as long as their process group lets them."""
    if dist.get_rank() == 0 and not _SLOWED:
        _SLOWED.append(True)
        _spin(SLOWED_S)
    return correct(x, dim)


_SLOWED: list[bool] = []


#: How long :func:`rank0_slow_then_gathers` computes on rank 0.
SLOWED_S = 12.0


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def abort_mismatch(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Unpadded ``all_gather`` of ragged tensors: gloo aborts one rank on the size mismatch."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x)
    return torch.cat(pieces, dim)


def segfault_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 dereferences NULL."""
    _on_rank_one(lambda: ctypes.string_at(0))
    return correct(x, dim)


def exit_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 calls ``os._exit(3)``."""
    _on_rank_one(lambda: os._exit(3))
    return correct(x, dim)


def raise_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 raises before the gather; the others block in it."""

    _on_rank_one(lambda: _raise(ValueError("planted failure on rank 1")))
    return correct(x, dim)


def raises_inside_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Every rank enters one all_gather, rank 1 with outputs of the wrong size, which the backend
    refuses at once: rank 1 raised inside the collective its peers wait in (they cannot tell)."""
    world = dist.get_world_size()
    dist.all_gather([torch.empty(7 if dist.get_rank() == 1 else 1) for _ in range(world)], torch.zeros(1))
    return correct(x, dim)


def goes_on_alone(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 raises (after a moment); the others gather without it, which gloo completes alone
    for empty tensors.  Every rank returns, yet rank 1 is now a collective behind on the world group.
    """
    _on_rank_one(lambda: (time.sleep(0.5), _raise(ValueError("planted failure on rank 1"))))
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    return torch.cat(pieces, dim)


def _raise(exc: Exception) -> None:
    raise exc


def desync_extra_collective(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 0 adds an all_reduce the other ranks never enter."""
    if dist.get_rank() == 0:
        dist.all_reduce(torch.zeros(1))
    return correct(x, dim)


def killed_by_sigkill_rank1(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Rank 1 is killed from outside (here: by itself) with SIGKILL."""
    _on_rank_one(lambda: os.kill(os.getpid(), 9))
    return correct(x, dim)


_KEPT: list = []  # what the leaking variants keep alive, as a careless module would


def leaks_thread(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Right answer, but starts a thread it never stops (a prefetcher left behind)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="planted-leak", daemon=True)
    thread.start()
    _KEPT.append((thread, stop))
    return correct(x, dim)


def leaks_file(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Right answer, but opens a file it never closes."""
    _KEPT.append(open(os.devnull))
    return correct(x, dim)


def leaks_group(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Right answer, but makes a new process group on every call and keeps it (a mesh rebuilt per call)."""
    _KEPT.append(dist.new_group(list(range(dist.get_world_size()))))
    return correct(x, dim)


def leaves_global_state(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Right answer, but leaves torch's default dtype at float64 and grad mode off."""
    y = correct(x, dim)
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    return y


# -- hangs the confirmation must tell apart: the machine's, the target's, the target's history's ------


HICCUP_MARKER = "planted-hiccup.done"


def hiccup_once(x: torch.Tensor, dim: int) -> torch.Tensor:
    """A stand-in for the machine stalling a rank once: rank 1 hangs on the first 2-d case that
    runs with this working directory (a marker file there remembers it), never again."""
    if dist.get_rank() == 1 and x.dim() >= 2 and not os.path.exists(HICCUP_MARKER):
        open(HICCUP_MARKER, "w").close()
        time.sleep(10_000)
    return correct(x, dim)


_SAW_FLOAT64: list[bool] = []


def hangs_after_float64(x: torch.Tensor, dim: int) -> torch.Tensor:
    """State kept between calls: once rank 1 has gathered float64, it hangs on any other dtype."""
    if dist.get_rank() == 1:
        if x.dtype == torch.float64:
            _SAW_FLOAT64.append(True)
        elif _SAW_FLOAT64:
            time.sleep(10_000)
    return correct(x, dim)


# -- failures of the harness's own steps (what must exit 3, or be retried) ------------------------------


def measurement_dies(device: str = "cpu") -> None:
    """A capability measurement whose rank 0 dies, as one killed for memory would."""
    if dist.get_rank() == 0:
        os._exit(9)


def measurement_dies_once(device: str = "cpu") -> dict:
    """Dies like :func:`measurement_dies` the first time in this working directory, then measures for real."""
    if not os.path.exists(HICCUP_MARKER):
        dist.barrier()  # both ranks see the marker missing before rank 0 creates it
        if dist.get_rank() == 0:
            open(HICCUP_MARKER, "w").close()
            os._exit(9)
        return {}
    from harness.ranks.rank_calls import measure_capabilities

    return measure_capabilities(device)



def makes_a_group_per_call(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """A correct gather over ``group`` that first makes a process group of its members, on every
    call, as gathers that build one per call do: a rank idle in a case never calls it, so it
    falls behind its peers in torch's count of groups made (which names the next group)."""
    dist.new_group(dist.get_process_group_ranks(group) if group is not None else None)
    return all_gather_ragged(x, dim, group=group)


def groups_made_slowly_on_rank1(seconds: float) -> None:
    """Rank 1 sleeps ``seconds`` before it makes each process group from now on (a stand-in for a
    group whose connections are slow to come up): the harness's own step, not the target's."""
    _on_rank_one(lambda: _patch_new_group(lambda: time.sleep(seconds)))


def groups_fail_on_rank1() -> None:
    """Rank 1 cannot make a process group from now on (as a rank whose connections broke)."""
    _on_rank_one(lambda: _patch_new_group(lambda: _raise(RuntimeError("planted: cannot make a group"))))


def _patch_new_group(first) -> None:
    real = dist.new_group

    def new_group(*args, **kwargs):
        first()
        return real(*args, **kwargs)

    dist.new_group = new_group


def adds_one(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Wrong values, through recorded collectives only: the correct gather, plus one."""
    return correct(x, dim) + 1
