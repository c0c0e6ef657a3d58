"""Shrinking: one minimal failure per property, and when to stop looking for a smaller one.

Each property raises its own exception type inside the Hypothesis test (:data:`VIOLATION_TYPES`),
so Hypothesis keeps and shrinks a separate minimal counterexample per broken property; a
:class:`ShrinkClock` says when shrinking has gone on long enough, counted in steps, not seconds,
so the same seed shrinks to the same case on any machine.
"""

from __future__ import annotations

import time

from harness.core.checks import PROPERTIES
from harness.search import confirm
from harness.search.finding import Finding
from harness.search.results import Progress

#: Shrinking stops after this many cases run since the first failure: a bound that does not
#: move with the machine's speed, so the same seed shrinks to the same case on any machine.
MAX_SHRINK_STEPS = 400


class PropertyViolation(AssertionError):
    """Raised inside the Hypothesis test when a case breaks a property."""


#: Where Hypothesis keeps a failure of each property: ``bits`` shares ``values``'s bucket, so a
#: bug that changes values is shrunk once (a case where only bits differ is one of its cases).
BUCKETS: dict[str, str] = {prop: "values" if prop == "bits" else prop for prop in PROPERTIES}
_BUCKET_TYPES: dict[str, type[PropertyViolation]] = {
    bucket: type(bucket.title().replace("-", "") + "Violation", (PropertyViolation,), {}) for bucket in set(BUCKETS.values())
}
#: One exception type per bucket: Hypothesis keeps one minimal example per type.
VIOLATION_TYPES: dict[str, type[PropertyViolation]] = {prop: _BUCKET_TYPES[BUCKETS[prop]] for prop in PROPERTIES}


class ShrinkClock:
    """When to stop shrinking: after ``max_steps`` cases (:data:`MAX_SHRINK_STEPS`), or once the
    steps that faulted (hung, crashed, desynced: each costs a timeout or a fresh rank set) add up
    to the budget, or (a last resort) after ten times the budget.  A value or gradient bug never
    faults, so how far it shrinks does not depend on the machine's speed.

    With ``fault_steps`` the budget is a count: at most that many faulty steps, and no wall
    clock at all, so a fault shrinks to the same case on a loaded machine as on a quiet one.
    """

    def __init__(self, budget_s: float, *, fault_steps: int | None = None, max_steps: int = MAX_SHRINK_STEPS) -> None:
        self.budget_s = budget_s
        self.fault_steps = fault_steps
        self.max_steps = max_steps
        self.first_failure: float | None = None
        self.steps = 0
        self.faults = 0
        self.fault_s = 0.0
        self.cut_after_s: float | None = None
        self.cut_reason = ""

    def failed(self, elapsed_s: float, kind: str) -> None:
        self.first_failure = self.first_failure or time.monotonic()
        if kind in confirm.FAULTS:
            self.fault_s += elapsed_s
            self.faults += 1

    def out_of_time(self) -> bool:
        if self.first_failure is None:
            return False
        if self.cut_reason:
            return True
        self.steps += 1
        shrinking_s = time.monotonic() - self.first_failure
        if self.steps > self.max_steps:
            self.cut_reason = f"after {self.max_steps} shrinking steps"
        elif self.fault_steps is not None:
            if self.faults > self.fault_steps:
                self.cut_reason = (f"after {self.fault_steps} shrinking steps that hung, crashed or desynced "
                                   f"(each waits for --timeout or a fresh rank set)")
        elif self.fault_s > self.budget_s or shrinking_s > 10 * self.budget_s:
            self.cut_reason = (f"after {self.budget_s:g} s of shrinking steps that hung, crashed or desynced "
                               f"(each waits for --timeout or a fresh rank set)")
        if self.cut_reason:
            self.cut_after_s = shrinking_s
        return bool(self.cut_reason)


def kept_violation(finding: Finding, found: dict[str, Finding], progress: Progress) -> PropertyViolation:
    """Keep ``finding`` as its bucket's latest (smallest) failure; the exception that says so."""
    found[BUCKETS[finding.property]] = finding
    progress.failures = len(found)
    return VIOLATION_TYPES[finding.property](finding.message)


def reraise_unless_violations(group: BaseExceptionGroup) -> None:
    rest = group.subgroup(lambda exc: not isinstance(exc, (PropertyViolation, BaseExceptionGroup)))
    if rest is not None:
        raise rest
