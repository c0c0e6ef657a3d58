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

from harness.core.contract import ALL_DTYPES
from harness.core.errors import PoolError, RankCallFailed, UsageError
from harness.ranks import rank_calls
from harness.ranks.rank_calls import OPS, PROBED_DTYPES

if TYPE_CHECKING:
    from harness.pool.pool import Pool

MEASURE_WORLD_SIZE = 2
#: The measured op (:data:`~harness.ranks.rank_calls.OPS`) that is each collective's own.
COLLECTIVE_OPS: dict[str, str] = {"gather": "all_gather", "reduce-scatter": "reduce_scatter_tensor",
                                  "all-to-all": "all_to_all_single", "all-reduce": "all_reduce"}


@dataclass(frozen=True)
class Capabilities:
    """``cells[(dtype, op)]`` is ``"ok"`` or the one-line reason the op failed."""

    backend: str
    device: str
    torch_version: str
    cells: dict[tuple[str, str], str]
    #: The ranks it was measured on: 1 for nccl on one GPU, where a collective may not reach the
    #: backend's own checks (nccl's reduce_scatter_tensor of one rank takes int16), else 2.
    world_size: int = 2

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

    def refusal(self, dtypes: tuple[str, ...], collective: str = "gather") -> str:
        """Why ``dtypes`` are not drawn, in words that fit ``collective``: the backend cannot
        all_gather them (what every case needs moved), and where so, not its own op either."""
        them = "it" if len(dtypes) == 1 else "them"
        op = COLLECTIVE_OPS.get(collective, "all_gather")
        if op == "all_gather":
            return f"{self.backend} cannot all_gather {them}"
        also = all(not self.supports(name, op) for name in dtypes)
        return (f"{self.backend} cannot all_gather {them}" + (f" nor {op} {them}" if also else "")
                + f", so no {collective} of {them} is checked")

    def table(self) -> str:
        """A fixed-width matrix: one row per dtype, one column per op."""
        ranks = f"{self.world_size} rank{'s' if self.world_size > 1 else ''}"
        lines = [f"{self.backend}/{self.device} capabilities, torch {self.torch_version} ({ranks})",
                 "  ".join(["dtype".ljust(13), *OPS])]
        for dtype in PROBED_DTYPES:
            marks = [("yes" if self.supports(dtype, op) else "no").ljust(len(op)) for op in OPS]
            lines.append("  ".join([dtype.ljust(13), *marks]).rstrip())
        return "\n".join(lines)


_MEASURED: dict[tuple[str, str], Capabilities] = {}


#: How many times the measurement runs (on fresh ranks each time) before its failure is reported.
TRIES = 2
#: What the ranks run to measure (a self-test plants a measurement that dies here).
MEASURE_TARGET = rank_calls.address(rank_calls.measure_capabilities)


def measure(pool: Pool, backend: str = "gloo", device: str = "cpu") -> Capabilities:
    """The capability matrix of ``backend``/``device``, measured on ranks of ``pool`` once per process."""
    key = (backend, device)
    if key not in _MEASURED:
        _MEASURED[key] = _measure_on_ranks(pool, backend, device)
    return _MEASURED[key]


def _measure_on_ranks(pool: Pool, backend: str, device: str) -> Capabilities:
    """Run :func:`harness.ranks.rank_calls.measure_capabilities` on the pool's ranks; a failure is the
    harness's own: tried again on fresh ranks, then a :class:`~harness.core.errors.PoolError`."""
    world = 1 if backend == "nccl" and torch.cuda.device_count() < 2 else MEASURE_WORLD_SIZE
    why = ""
    for _ in range(TRIES):
        try:
            first = pool.call(world, MEASURE_TARGET, device, backend=backend, device=device, timeout=60)[0]
        except RankCallFailed as failed:
            why = str(failed)
            continue
        if not first.error:
            return Capabilities(backend, device, torch.__version__, first.value, world)
        why = f"rank {first.rank} raised {first.error_line()}"
    raise PoolError(f"the capability measurement of {backend}/{device} failed {TRIES} times, each on fresh ranks "
                    f"(last: {why}); nothing was checked: run the command again, and if it fails the same way, "
                    f"report it with this line")
