"""What a set learns of its rank processes: whether they live, how busy they are, a fault's evidence.

:class:`RankEvidence` is what :class:`harness.pool.rankset.RankSet` asks of its ranks beyond their
replies: which are dead, their CPU use for the hang watch (:mod:`harness.pool.watch`), and after a
fault the stacks of blocked ranks and the logs of dead ones, for :class:`~harness.pool.faults.RankFault`.
Local ranks are child processes; a remote set (:mod:`harness.pool.remote_driver`) overrides each.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from harness.core.procedure import RankResult
from harness.pool.faults import RankFault, file_size, file_tail, without_watchdog
from harness.pool.watch import usage
from harness.ranks.protocol import last_entered, read_slot

#: How long to wait for a rank to write its stack after SIGUSR1.
STACK_WAIT_S = 1.0


class RankEvidence:
    """The rank processes of a set, as the controller reads them (a mixin of :class:`~harness.pool.rankset.RankSet`)."""

    world_size: int
    procs: list[Any]
    last: list[Any]
    logs: list[str]
    stacks: list[str]
    closed: set[int]

    def _sentinels(self) -> dict[Any, int]:
        """Waitables that become ready when a rank process ends, mapped to its rank."""
        return {p.sentinel: r for r, p in enumerate(self.procs)}

    def _dead(self) -> list[bool]:
        """Which ranks are dead; a rank whose pipe closed is, and the forkserver soon says how."""
        for r in self.closed:
            self.procs[r].join(timeout=2.0)
        return [not p.is_alive() for p in self.procs]

    def _alive(self, r: int) -> bool:
        return self.procs[r].is_alive()

    def _usage(self, r: int) -> tuple[float, bool] | None:
        """Rank ``r``'s CPU use so far and whether it runs (:func:`harness.pool.watch.usage`): what
        :class:`~harness.pool.watch.Watch` reads."""
        return usage(self.procs[r].pid)

    def _death(self, r: int, last: str, log_offsets: list[int]) -> RankFault:
        """The fault of a rank that died: its exit status and what it wrote meanwhile."""
        self.procs[r].join(timeout=1.0)
        return RankFault(r, "died", exitcode=self.procs[r].exitcode, last_collective=last,
                         log_tail=file_tail(self.logs[r], log_offsets[r]))

    def _last(self, r: int) -> str:
        return last_entered(read_slot(self.last[r]))

    def _diagnose(self, results: list[RankResult | None], log_offsets: list[int]) -> list[RankFault]:
        faults: list[RankFault] = []
        blocked = [r for r, res in enumerate(results) if res is None and self._alive(r)]
        # Read where each rank is just before its stack is dumped, so the two agree: a rank still
        # running moves on meanwhile.  A ledger known only from the dump (remote ranks) is read after it.
        before = [self._last(r) for r in range(self.world_size)]
        stacks = self._dump_stacks(blocked)
        for r, res in enumerate(results):
            last = (before[r] if before[r].startswith("#") else self._last(r)) or "(none)"
            if res is not None and res.error:
                faults.append(RankFault(r, "raised", last_collective=last, error=res.error))
            elif res is None and r in blocked:
                faults.append(RankFault(r, "blocked", last_collective=last, stack=stacks.get(r, "")))
            elif res is None:
                faults.append(self._death(r, last, log_offsets))
        return faults

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        """Have each blocked rank's faulthandler write its Python stacks, then read them."""
        sizes = {r: file_size(self.stacks[r]) for r in ranks}
        for r in ranks:
            try:
                os.kill(self.procs[r].pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STACK_WAIT_S
        stacks: dict[int, str] = {}
        while time.monotonic() < deadline and len(stacks) < len(ranks):
            time.sleep(0.02)
            for r in ranks:
                if r not in stacks and file_size(self.stacks[r]) > sizes[r]:
                    time.sleep(0.02)  # let the dump finish
                    stacks[r] = without_watchdog(file_tail(self.stacks[r], sizes[r], limit=8000))
        return stacks
