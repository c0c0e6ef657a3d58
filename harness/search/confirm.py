"""Confirm a finding before it is reported: alone on fresh ranks, after its history, with uniform layouts.

The search runs thousands of cases on warm ranks, so a minimal counterexample may fail only
because of what ran before it (a gather that caches sizes across calls), or only sometimes (a
race).  Before it is reported, each finding is

1. **replayed alone on fresh ranks** (:data:`REPLAYS` times): fails every time -- ``confirmed``;
   some times -- ``intermittent``;
2. if it never failed alone, **replayed after its history**, the cases that had run on its
   ranks when it was seen: the shortest history found that makes it fail (one earlier case,
   else the whole history cut down by delta debugging; a hang or crash must fail twice
   running after it) is reported -- ``history-dependent``, with that sequence in the message,
   the JSON and the repro; none -- ``not reproduced``;
3. if its ranks differ in input or cotangent layout, **re-run with every rank on one layout**
   (each layout it has): passing on all of them is a condition worth saying -- "fails only when
   ranks' cotangent layouts differ", rare in training, where every rank runs the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from harness.core.case import Case
from harness.core.compare import Violation
from harness.search.finding import UNEXPLAINED_KINDS, Finding, format_violations

REPLAYS = 3
#: Fault kinds: replaying one costs a stall or a timeout, so one reproduction confirms it.
FAULTS = frozenset({"hang", "crash", "desync", "exception"})
#: How many single earlier cases are tried as the history before the whole history is.
SINGLE_TRIES = 16
#: How many replays the search for a failure's shortest history may run: a count, not seconds, so
#: a loaded machine finds the same history as a quiet one (the catalogue's table must not vary).
HISTORY_REPLAYS = 48
#: How many replays running a history must fail for a hang or crash to be put down to it.
HISTORY_FAULT_TIMES = 2

#: Runs ``case`` on fresh ranks after ``history`` (earlier cases with their ``repeat`` flags)
#: and returns the violations of ``case`` alone.
Replay = Callable[[Case, Sequence[tuple[Case, bool]]], list[Violation]]


def confirm(finding: Finding, replay: Replay) -> Finding:
    """Replay ``finding`` as the module docstring says; set its status, history and condition."""
    _alone(finding, replay)
    if finding.status == "not reproduced" and finding.seen_after:
        _with_history(finding, replay)
    if finding.status != "not reproduced":
        finding.condition = layout_condition(finding.case, lambda case: bool(replay(case, finding.history)))
    return finding


def _alone(finding: Finding, replay: Replay) -> None:
    failed = run = 0
    for _ in range(REPLAYS):
        run += 1
        violations = replay(finding.case, ())
        if violations and not failed:
            _describe(finding, violations)
        failed += bool(violations)
        if failed and finding.kind in FAULTS:
            break  # a fault that came back is confirmed; replaying it again costs a timeout
    finding.replays = (failed, run)
    finding.status = "confirmed" if failed == run else "intermittent" if failed else "not reproduced"


def _with_history(finding: Finding, replay: Replay) -> None:
    """The shortest history (one case, else delta debugging over all of them) after which it fails."""
    history = list(finding.seen_after)
    budget = _Budget(HISTORY_REPLAYS)
    # A hang or crash carries nothing of the target's own, so one replay that stalls is not yet
    # evidence against it (the machine can stall one): such a failure must come back twice running.
    times = HISTORY_FAULT_TIMES if finding.kind in UNEXPLAINED_KINDS else 1

    def fails(earlier: Sequence[tuple[Case, bool]]) -> bool:
        for _ in range(times):
            budget.left -= 1
            violations = replay(finding.case, earlier)
            if not violations:
                return False
            _describe(finding, violations)
        return True

    for earlier in list(reversed(history))[:SINGLE_TRIES]:
        if fails([earlier]):
            finding.history, finding.status = (earlier,), "history-dependent"
            return
        if budget.spent():
            return
    if fails(history):
        finding.history, finding.status = tuple(_shortest(history, fails, budget)), "history-dependent"


class _Budget:
    """Replays left to a history search (:data:`HISTORY_REPLAYS`)."""

    def __init__(self, replays: int) -> None:
        self.left = replays

    def spent(self) -> bool:
        return self.left <= 0


def _describe(finding: Finding, violations: list[Violation]) -> None:
    """Take the replay's account of the failure (a replay collects every stack and log; the
    search's runs do not) when it is of the same property."""
    if violations[0].property == finding.property:
        finding.violations, finding.kind = violations, violations[0].kind
        finding.message = format_violations(finding.case, violations)


def _shortest(history: list[tuple[Case, bool]], fails: Callable[[Sequence[tuple[Case, bool]]], bool],
              budget: _Budget) -> list[tuple[Case, bool]]:
    """Delta debugging (ddmin): drop chunks of the history while it still makes the case fail."""
    chunks = 2
    while len(history) > 1 and not budget.spent():
        size = max(1, len(history) // chunks)
        for start in range(0, len(history), size):
            rest = history[:start] + history[start + size:]
            if rest and fails(rest):
                history, chunks = rest, max(chunks - 1, 2)
                break
        else:
            if size == 1:
                break
            chunks = min(len(history), chunks * 2)
    return history


def layout_condition(case: Case, fails: Callable[[Case], bool]) -> str:
    """Whether a failure needs ranks whose layouts differ: re-run with every rank on each layout it has."""
    for field, what in (("cotangent_layout", "cotangent layouts"), ("layout", "input layouts")):
        layouts = sorted({getattr(spec, field) for r, spec in enumerate(case.ranks) if not case.idle(r)})
        if len(layouts) < 2:
            continue
        uniform = {layout: fails(_every_rank(case, field, layout)) for layout in layouts}
        if not any(uniform.values()):
            tried = "; ".join(f"every rank {layout}: passes" for layout in layouts)
            return f"fails only when ranks' {what} differ ({tried})"
        still = ", ".join(layout for layout, failed in uniform.items() if failed)
        return f"fails with every rank's {what[:-1]} {still} too"
    return ""


def _every_rank(case: Case, field: str, layout: str) -> Case:
    changes: dict[str, Any] = {field: layout}
    return dataclasses.replace(case, ranks=tuple(dataclasses.replace(spec, **changes) for spec in case.ranks))


def uniform_layouts(case: Case) -> bool:
    """Every rank that gathers holds its input, and its cotangent, in one layout."""
    active = [spec for r, spec in enumerate(case.ranks) if not case.idle(r)]
    return len({spec.layout for spec in active}) <= 1 and len({spec.cotangent_layout for spec in active}) <= 1
