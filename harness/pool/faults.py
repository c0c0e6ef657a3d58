"""The fault model: how a run of one case can break, and what is known about each rank that broke.

A run's :class:`Outcome` is what every judge reads, so it lives apart from the controller that
produces it.  Here too: how a run is classified (:func:`classify`), how the ranks' ledgers show a
run can never finish (:class:`Ledgers`), and how a broken rank is described (:class:`RankFault`);
collecting the evidence needs the processes (:mod:`harness.pool.evidence`).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Any

from harness.core.case import Case
from harness.core.procedure import RankResult
from harness.ranks.protocol import RETURNED, Ledger, last_entered, read_slot


@dataclass
class RankFault:
    """Why one rank did not return normally, with what is known about where it was."""

    rank: int
    state: str  # "raised", "blocked", "died"
    exitcode: int | None = None
    last_collective: str = ""
    stack: str = ""
    log_tail: str = ""
    error: str = ""

    def describe(self) -> str:
        """E.g. ``rank 1 blocked in collective #1 all_gather(...)``, then its stack, traceback or output;
        "#3" is the same collective in every text of a fault."""
        where = _where(self.last_collective)
        if self.state == "died":
            head, body = f"rank {self.rank} died: {_exit_text(self.exitcode)}, {where}", self.log_tail
        elif self.state == "blocked":
            if where.startswith("after"):  # the ledger says it left its last one; its stack says where it is
                where = f"(its last collective, {where.removeprefix('after collective ')})"
            head, body = f"rank {self.rank} blocked {where}", self.stack
        else:
            head, body = f"rank {self.rank} raised {where}", self.error
        return head + ("\n" + _indent(body.rstrip()) if body.strip() else "")

    def headline(self) -> str:
        """One line: what happened to the rank, with the last line it wrote if it died."""
        head = self.describe().splitlines()[0]
        last = next((line.strip() for line in reversed(self.log_tail.splitlines()) if line.strip()), "")
        return f"{head} ({last})" if self.state == "died" and last else head


def _where(last: str) -> str:
    """Where a rank was, from its last collective (:func:`harness.ranks.protocol.last_entered`)."""
    if not last.startswith("#"):
        return "before entering any collective"
    if last.endswith(RETURNED):
        return f"after collective {last[: -len(RETURNED)]} returned"
    return f"in collective {last}"


@dataclass
class Outcome:
    """What came back from one case: per-rank results, and the fault if the run broke: ``hang``,
    ``crash``, ``exception`` (a rank raised while others stayed blocked) or ``desync`` (where:
    ``desync``).  Ranks that raised and returned are in ``results`` with ``error`` set."""

    case: Case
    results: list[RankResult | None]
    fault: str | None = None
    faults: list[RankFault] = field(default_factory=list)
    elapsed_s: float = 0.0
    desync: str = ""
    history: tuple[tuple[Case, bool], ...] = ()
    #: How the wait for unreturned ranks ended, when their time ran out (:class:`harness.pool.watch.Watch`):
    #: idle (stuck) or still busy at the cap.
    waited: str = ""

    @property
    def errors(self) -> list[RankResult]:
        return [r for r in self.results if r is not None and r.error]

    @property
    def unrecorded(self) -> bool:
        """Whether some rank ran operations the ledgers could not compare (``RankResult.unrecorded``)."""
        return any(r is not None and r.unrecorded for r in self.results)

    @property
    def leaks(self) -> list[str]:
        """What the target left behind on each rank (threads, open files); the set was replaced for it."""
        return [f"{leak} on rank {r.rank}" for r in self.results if r is not None for leak in r.leaked]

    def describe_fault(self) -> str:
        lines = [f"{self.fault}: " + _fault_summary(self)]
        if self.fault == "hang" and self.waited:
            lines.append(self.waited)
        lines += [fault.describe() for fault in self.faults]
        return "\n".join(lines)



def classify(results: list[RankResult | None], dead: list[bool], ledgers: Ledgers) -> tuple[str | None, str]:
    """The fault of a run, if any, and for a desync where it happened.

    A desync is named as such even when a rank then died of it (gloo aborts a rank whose
    peers sent payloads of another size): the mismatch is the cause, the abort its effect.
    """
    mismatch = ledgers.mismatch()
    if mismatch:
        return "desync", mismatch
    if any(dead):
        return "crash", ""
    if any(res is None for res in results):
        return ("exception" if any(res is not None and res.error for res in results) else "hang"), ""
    if not any(res.error for res in results if res is not None):
        for group in ledgers.layout:
            counts = {r: len(res.collectives) for r in group if (res := results[r]) is not None}
            if len(set(counts.values())) > 1:
                return "desync", "ranks entered different numbers of collectives: " + ", ".join(
                    f"rank {r} entered {_collectives(n)}" for r, n in counts.items())
    return None, ""


def in_step(results: list[RankResult | None]) -> bool:
    """Every rank returned, and the members of each process group have issued as many operations on it.

    Only then may a set run another case: a rank that went on alone (gloo gathers empty tensors
    locally), or ran unrecorded collectives, is ahead by a tag, and the next case would hang.
    """
    counts: dict[str, dict[int, int]] = {}
    members: dict[str, tuple[int, ...]] = {}
    for rank, res in enumerate(results):  # by place: a helper that formed the group reports rank 0 everywhere
        if res is None or res.sequences is None:
            return False
        for name, (ranks, count) in res.sequences.items():
            members[name] = ranks
            counts.setdefault(name, {})[rank] = count
    return all(set(counts[name]) == set(ranks) and len(set(counts[name].values())) == 1
               for name, ranks in members.items())


class Ledgers:
    """The collectives each rank of a running case has entered, compared within each group while
    they run: different collectives at one place (:meth:`mismatch`), or a wait for a finished
    peer that never enters it (:meth:`doomed`), can never complete."""

    def __init__(self, slots: list[Any], layout: tuple[tuple[int, ...], ...]) -> None:
        self.slots = slots
        self.layout = layout

    def _read(self, r: int) -> Ledger:
        return read_slot(self.slots[r])

    def mismatch(self) -> str:
        """Where two members of a group entered different collectives at the same place, or ``""``."""
        for group in self.layout:
            first, *others = group
            mine = self._read(first).by_seq()
            for other in others:
                theirs = self._read(other).by_seq()
                for seq in sorted(mine.keys() & theirs.keys()):
                    a, b = mine[seq], theirs[seq]
                    if a.key and b.key and (a.key, a.peers) != (b.key, b.peers):
                        return (f"at collective #{seq}, rank {first} entered {a.described} but rank {other} entered "
                                f"{b.described}")
        return ""

    def doomed(self, waiting: list[int], results: list[RankResult | None]) -> bool:
        """Every waiting rank sits inside a collective that a finished peer never entered: it can
        only wait for the timeout, so stop now."""
        return bool(waiting) and all(self._hopeless(r, waiting) for r in waiting)

    def _hopeless(self, r: int, waiting: list[int]) -> bool:
        ledger = self._read(r)
        inside = ledger.inside()
        if inside is None:
            return False
        peers = [int(p) for p in inside.peers.split(",")] if inside.peers else range(len(self.slots))
        mine = ledger.counts.get(inside.peers, 0)
        return any(self._read(s).counts.get(inside.peers, 0) < mine for s in peers if s != r and s not in waiting)

    def stuck_for_good(self, results: list[RankResult | None]) -> str:
        """After a timeout: blocked ranks waiting in collectives a finished peer never entered, described."""
        waiting = [r for r, res in enumerate(results) if res is None]
        for r in waiting:
            if self._hopeless(r, waiting):
                return (f"rank {r} waits in collective {last_entered(self._read(r))}, which a peer that "
                        f"finished never entered")
        return ""


def _fault_summary(outcome: Outcome) -> str:
    by_state: dict[str, list[int]] = {}
    for fault in outcome.faults:
        by_state.setdefault(fault.state, []).append(fault.rank)
    parts = [f"{state} on rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}" for state, r in by_state.items()]
    if outcome.fault == "desync":
        returned = [res for res in outcome.results if res is not None and not res.error]
        parts = [outcome.desync] + [
            f"rank {res.rank} returned after {_collectives(len(res.collectives))}"
            + (": " + ", ".join(f"#{n} {name}" for n, name in enumerate(res.collectives, 1)) if res.collectives else "")
            for res in returned
        ]
    return "; ".join(parts) or "no rank returned"


def _collectives(count: int) -> str:
    return f"{count} collective{'' if count == 1 else 's'}"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} (exit {code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def file_tail(path: str, offset: int, limit: int = 3000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return ""
    text = data.decode(errors="replace")
    return text if len(text) <= limit else "…" + text[-limit:]


def without_watchdog(stack: str) -> str:
    """Drop the rank's own watchdog thread from a faulthandler dump: it is never the culprit."""
    blocks = stack.split("\n\n")
    return "\n\n".join(b for b in blocks if "_watch_driver" not in b).strip()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
