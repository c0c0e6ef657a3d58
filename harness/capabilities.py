"""The backend capability matrix, measured on real ranks, never assumed.

Which dtypes each collective accepts changes between torch releases (torch 2.13's gloo
accepts ``all_reduce`` on bool, which older notes say it rejects), so the harness asks the
installed torch: two ranks run every (op, dtype) cell and report ``ok`` only when the op
returned the right values.  Strategies draw only dtypes whose ``all_gather`` cell is ok.
Measured once per process and backend/device (about a second), then kept in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from harness.contract import ALL_DTYPES
from harness.errors import PoolError, RankCallFailed, UsageError
from harness.rank import case_device

if TYPE_CHECKING:
    from harness.pool import RankSets

#: Beyond the harness's dtypes, probe the ones backends are known to reject.
PROBED_DTYPES: tuple[str, ...] = ALL_DTYPES + ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
OPS: tuple[str, ...] = ("all_gather", "all_gather_into_tensor", "all_reduce", "reduce_scatter_tensor", "all_to_all_single", "broadcast")
PROBE_WORLD_SIZE = 2


@dataclass(frozen=True)
class Capabilities:
    """``cells[(dtype, op)]`` is ``"ok"`` or the one-line reason the op failed."""

    backend: str
    device: str
    torch_version: str
    cells: dict[tuple[str, str], str]

    def supports(self, dtype: str, op: str = "all_gather") -> bool:
        return self.cells.get((dtype, op)) == "ok"

    def gather_dtypes(self) -> tuple[str, ...]:
        """The harness dtypes the backend can all_gather: what strategies may draw."""
        return tuple(d for d in ALL_DTYPES if self.supports(d))

    def drawable(self, dtypes: tuple[str, ...]) -> tuple[str, ...]:
        """Those of ``dtypes`` the backend can all_gather; :class:`UsageError` when none is."""
        drawn = tuple(name for name in dtypes if self.supports(name))
        if not drawn:
            raise UsageError(f"--dtypes: none of {', '.join(dtypes)} is supported by {self.backend}/{self.device} "
                             f"(supported: {', '.join(self.gather_dtypes())})")
        return drawn

    def table(self) -> str:
        """A fixed-width matrix: one row per dtype, one column per op."""
        width = max(len(op) for op in OPS)
        lines = [f"{self.backend}/{self.device} capabilities, torch {self.torch_version} ({PROBE_WORLD_SIZE} ranks)",
                 "dtype".ljust(14) + " ".join(op.ljust(width) for op in OPS)]
        for dtype in PROBED_DTYPES:
            marks = ["yes" if self.supports(dtype, op) else "no" for op in OPS]
            lines.append(dtype.ljust(14) + " ".join(mark.ljust(width) for mark in marks))
        return "\n".join(lines)


_MEASURED: dict[tuple[str, str], Capabilities] = {}


#: How many times the probe runs (on fresh ranks each time) before its failure is reported.
TRIES = 2
#: What the ranks run to measure (a self-test plants a probe that dies here).
PROBE_TARGET = "harness.capabilities:probe_on_rank"


def measure(pool: RankSets, backend: str = "gloo", device: str = "cpu") -> Capabilities:
    """The capability matrix of ``backend``/``device``, probed on ranks of ``pool`` once per process."""
    key = (backend, device)
    if key not in _MEASURED:
        _MEASURED[key] = _probe(pool, backend, device)
    return _MEASURED[key]


def _probe(pool: RankSets, backend: str, device: str) -> Capabilities:
    """Run :func:`probe_on_rank` on the pool's ranks.

    The probe is the harness's own code on its own ranks, so its failure is never the target's:
    it is tried again on fresh ranks (harmless: it only reads), then reported as a
    :class:`~harness.errors.PoolError` naming what went wrong.
    """
    world = 1 if backend == "nccl" and torch.cuda.device_count() < 2 else PROBE_WORLD_SIZE
    why = ""
    for _ in range(TRIES):
        try:
            first = pool.call(world, PROBE_TARGET, device, backend=backend, device=device, timeout=60)[0]
        except RankCallFailed as failed:
            why = str(failed)
            continue
        if not first.error:
            return Capabilities(backend, device, torch.__version__, first.value)
        why = f"rank {first.rank} raised {(first.error or '').strip().splitlines()[-1]}"
    raise PoolError(f"the capability probe of {backend}/{device} failed {TRIES} times, each on fresh ranks "
                    f"(last: {why}); nothing was checked: run the command again, and if it fails the same way, "
                    f"report it with this line")


def probe_on_rank(device: str = "cpu") -> dict[tuple[str, str], str]:
    """Run inside every rank: try each (dtype, op) on ``device`` tensors and check the values.

    ``device`` is the set's (``cuda``: the GPU the rank is pinned to), because support
    differs by device as well as by backend: gloo on CUDA tensors is not gloo on CPU ones.
    gloo raises a Python error for an unsupported dtype on every rank alike, before any
    communication, so one failing cell leaves the group usable for the next (so on every
    release from torch 2.4 to 2.15: on 2.4 to 2.8 the complex ``reduce_scatter_tensor`` and
    ``broadcast`` cells fail with "Invalid scalar type" and the cells after them pass).
    """
    device = case_device(device)
    cells: dict[tuple[str, str], str] = {}
    for name in PROBED_DTYPES:
        dtype = getattr(torch, name, None)
        for op in OPS:
            if dtype is None:
                cells[(name, op)] = "not in this torch"
                continue
            try:
                cells[(name, op)] = "ok" if _run_op(op, dtype, device) else "wrong values"
            except Exception as exc:  # the reason is the measurement
                cells[(name, op)] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return cells


def _filled(value: int, dtype: torch.dtype, device: str, n: int) -> torch.Tensor:
    """``n`` elements whose raw bytes all equal ``value``: exact in every dtype, no casts.

    A bool byte must be 0 or 1, so bools get the value's parity.
    """
    itemsize = torch.empty((), dtype=dtype).element_size()
    value = value % 2 if dtype == torch.bool else value
    return torch.full((n * itemsize,), value, dtype=torch.uint8, device=device).view(dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def _run_op(op: str, dtype: torch.dtype, device: str) -> bool:
    world, rank = dist.get_world_size(), dist.get_rank()
    mine = _filled(rank + 1, dtype, device, 3)
    everyone = torch.cat([_filled(r + 1, dtype, device, 3) for r in range(world)])
    if op == "all_gather":
        pieces = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(pieces, mine)
        return _same(torch.cat(pieces), everyone)
    if op == "all_gather_into_tensor":
        out = torch.empty_like(everyone)
        dist.all_gather_into_tensor(out, mine)
        return _same(out, everyone)
    if op == "broadcast":
        data = mine.clone()
        dist.broadcast(data, 0)
        return _same(data, _filled(1, dtype, device, 3))
    if op == "all_to_all_single":
        out = torch.empty_like(everyone)
        dist.all_to_all_single(out, mine.repeat(world))
        return _same(out, everyone)
    data = _filled(0, dtype, device, 3 * world)  # zeros sum to zeros exactly in every dtype
    if op == "all_reduce":
        dist.all_reduce(data)
        return _same(data, _filled(0, dtype, device, 3 * world))
    out = _filled(0, dtype, device, 3)
    dist.reduce_scatter_tensor(out, data)
    return _same(out, _filled(0, dtype, device, 3))
