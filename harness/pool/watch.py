"""The hang watch: whether ranks that have not returned by the deadline are slowed or stuck.

It reads the ranks' CPU time and thread states from ``/proc`` (:func:`usage`) over a window and
decides, at the deadline, whether a case gets more time (:class:`Watch`).
:class:`harness.pool.rankset.RankSet` runs the wait.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from harness.settings.options import COMPILE_PATIENCE, PATIENCE

#: How often the controller reads the ranks' collective ledgers while it waits for them: often
#: at first (a desync shows within milliseconds), then less so.
POLL_S = (0.005, 0.02)
_FAST_POLLS_S = 0.1
#: How long a look at the ranks lasts: busy within it (running, runnable or using the CPU) or not.
WINDOW_S = 0.5
#: CPU seconds the unreturned ranks must use within a window to count as busy; a rank asleep in
#: a wait uses none (its idle threads, a few milliseconds a second at most).
BUSY_CPU_S = 0.02
#: Thread states (``/proc``) of a rank that is getting on: running or runnable, or in a disk wait.
WORKING = frozenset({"R", "D"})
#: Once a peer has raised or died, unreturned ranks seen idle (asleep in a wait, using no CPU) for
#: this long are not waited for to the end of the grace (:data:`harness.pool.rankset.GRACE_S`): a rank
#: that can still finish runs or waits to run, so waiting out the grace would change nothing.
SETTLE_S = 0.1
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def usage(pid: int) -> tuple[float, bool] | None:
    """A process's CPU seconds so far and whether any of its threads is running, runnable or in a
    disk wait, from ``/proc`` (``None``: the system does not say).  Its child processes count as
    its own: a rank waiting on a compiler it started is busy."""
    try:
        whole = _stat_fields(f"/proc/{pid}/stat")
        threads = [_stat_fields(f"/proc/{pid}/task/{tid}/stat") for tid in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return None
    cpu = sum(int(whole[field]) for field in (11, 12, 13, 14)) * _TICK_S  # utime, stime, cutime, cstime
    working = any(fields[0] in WORKING for fields in threads)
    for child in _descendants(pid):
        cpu += (int(child[11]) + int(child[12])) * _TICK_S
        working = working or child[0] in WORKING
    return cpu, working


def _descendants(pid: int) -> list[list[str]]:
    """The stat fields of every live process below ``pid`` (compilers, worker pools), from ``/proc``."""
    stats: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stats[int(name)] = _stat_fields(f"/proc/{name}/stat")
            except (OSError, ValueError):  # gone meanwhile
                continue
    below, found = {pid}, []
    grew = True
    while grew:  # parents before children, whatever order their pids came in
        grew = False
        for child, fields in stats.items():
            if child not in below and int(fields[1]) in below:
                below.add(child)
                found.append(fields)
                grew = True
    return found


def _stat_fields(path: str) -> list[str]:
    """The fields of a ``/proc`` stat file after ``pid (comm)``: state, ppid, ..., utime (11), stime (12)."""
    with open(path) as stat:
        text = stat.read()
    return text[text.rindex(")") + 2:].split()


class Watch:
    """Tells a slowed case from a stuck one once its time is up.

    On a loaded machine a case of milliseconds can miss a timeout of seconds: a hang no replay
    brings back.  A stuck rank sleeps in a wait; a slowed one runs or waits to.  So at the
    deadline busy ranks get another :data:`WINDOW_S`, up to :data:`PATIENCE` times the timeout,
    and idle ones are a hang.  A rank inside ``torch.compile`` is busy up to
    :data:`COMPILE_PATIENCE` times the timeout, then :attr:`out_of_compile_time`, never a hang.
    """

    def __init__(self, look: Callable[[int], tuple[float, bool] | None], started: float, timeout_s: float,
                 compiling: Callable[[list[int]], bool] = lambda ranks: False) -> None:
        self.look, self.compiling = look, compiling
        self.started, self.timeout_s = started, timeout_s
        self.cap = started + max(timeout_s * PATIENCE, timeout_s + 2 * WINDOW_S)
        self.compile_cap = started + timeout_s * COMPILE_PATIENCE
        #: The wait ended on ranks still compiling: the case never ran.
        self.out_of_compile_time = False
        #: The ranks as last looked at, and when: a verdict needs a whole window since.
        self.before: dict[int, tuple[float, bool] | None] = {}
        self.since: float | None = None
        #: The ranks as first looked at once a peer raised or died, and when (:meth:`settled`).
        self.settling: tuple[dict[int, tuple[float, bool] | None], float] | None = None
        #: Why the wait ended without every rank (for the hang's message), once it has.
        self.verdict = ""

    def poll_s(self, now: float) -> float:
        """How long to wait for the ranks before reading their ledgers again (:data:`POLL_S`)."""
        return POLL_S[0] if now - self.started < _FAST_POLLS_S else POLL_S[1]

    def nearly(self, ranks: list[int], now: float) -> None:
        """The last window before the deadline has begun: look at the ranks (once)."""
        if self.since is None:
            self.before, self.since = {r: self.look(r) for r in ranks}, now

    def more_time(self, ranks: list[int], now: float) -> float | None:
        """At the deadline: a later one if the unreturned ``ranks`` were busy (or have not been
        watched for a whole window yet), else ``None``."""
        if self.since is None or now - self.since < WINDOW_S:
            self.nearly(ranks, now)
            return (self.since or now) + WINDOW_S
        if self.compiling(ranks):
            if now < self.compile_cap:
                return min(now + WINDOW_S, self.compile_cap)
            self.out_of_compile_time = True
            self.verdict = (f"still compiling after {now - self.started:.1f} s ({COMPILE_PATIENCE:g} x the "
                            f"{self.timeout_s:g} s timeout)")
            return None
        busy = _busy(self.before, after := self._look(ranks))
        self.before, self.since = after, now
        waited = now - self.started
        if busy and now < self.cap:
            return min(now + WINDOW_S, self.cap)
        if busy:
            self.verdict = (f"still busy after {waited:.1f} s ({PATIENCE:g} x the {self.timeout_s:g} s timeout): "
                            f"too slow, or spinning")
        elif busy is not None:
            self.verdict = (f"after {waited:.1f} s every rank that had not returned was idle (asleep in a wait "
                            f"for the last {WINDOW_S:g} s)")
        return None

    def settled(self, ranks: list[int], now: float) -> bool:
        """Once a peer has raised or died: whether the unreturned ``ranks`` stayed idle for a whole
        :data:`SETTLE_S` (the first call only looks).  Its own looks, apart from the deadline's
        window: the deadline and its patience stand whatever this says."""
        if self.settling is None:
            self.settling = (self._look(ranks), now)
            return False
        if self.compiling(ranks):
            return False
        before, since = self.settling
        if now - since < SETTLE_S:
            return False
        after = self._look(ranks)
        self.settling = (after, now)
        if _busy(before, after) is not False:
            return False
        self.verdict = (f"after {now - self.started:.1f} s every rank that had not returned was idle (asleep in a "
                        f"wait for {SETTLE_S:g} s) once a peer had raised or died")
        return True

    def _look(self, ranks: list[int]) -> dict[int, tuple[float, bool] | None]:
        return {r: self.look(r) for r in ranks}


def _busy(before: dict[int, tuple[float, bool] | None], after: dict[int, tuple[float, bool] | None]) -> bool | None:
    """Whether the ranks looked at ``after`` used CPU since ``before`` or run now (``None``: the
    system does not say)."""
    known = [(before.get(r), seen) for r, seen in after.items() if seen is not None]
    if not known:
        return None
    used = sum(seen[0] - earlier[0] for earlier, seen in known if earlier is not None)
    return used >= BUSY_CPU_S or any(seen[1] for _, seen in known)
