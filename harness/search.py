"""Search for counterexamples: Hypothesis draws cases, the pool runs them, the checks judge.

This is the one engine behind the CLI's ``check``, the pytest plugin, the Python API and the
catalogue report.  Each property raises its own exception type, so Hypothesis tracks
(and shrinks) a separate minimal counterexample per broken property; the last failing run
of each type is the minimal one, and is kept as a :class:`Finding`.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import hypothesis
from hypothesis import event, given, note, settings
from hypothesis.strategies import SearchStrategy

from harness import capabilities, probe, profiles, strategies
from harness.case import Case
from harness.checks import PROPERTIES, Violation, check_misuse, check_outcome, matching_contracts
from harness.contract import Contract, UsageError
from harness.conventions import Call
from harness.pool import Outcome, RankSets, shared_pool


class PropertyViolation(AssertionError):
    """Raised inside the Hypothesis test when a case breaks a property."""


#: One exception type per property: Hypothesis keeps one minimal example per type.
VIOLATION_TYPES: dict[str, type[PropertyViolation]] = {
    prop: type(prop.title().replace("-", "") + "Violation", (PropertyViolation,), {}) for prop in PROPERTIES
}


@dataclass
class Finding:
    """A minimal counterexample for one property."""

    property: str
    kind: str
    case: Case
    message: str
    violations: list[Violation]
    repro: str | None = None
    call: Call = field(default_factory=Call)
    repeat: bool = True
    bits: bool = True
    history: tuple[Case, ...] = ()

    def to_json(self) -> dict:
        return {"property": self.property, "kind": self.kind, "case": self.case.to_dict(),
                "case_line": self.case.describe(), "message": self.message, "repro": self.repro,
                "call": self.call.to_dict(), "history": [case.to_dict() for case in self.history]}


@dataclass
class Progress:
    """Live counters for progress lines; ``current`` is the case being run."""

    examples: int = 0
    failures: int = 0
    started: float = field(default_factory=time.monotonic)
    current: Case | None = None

    @property
    def rate(self) -> float:
        return self.examples / max(1e-9, time.monotonic() - self.started)


@dataclass
class CheckReport:
    """The result of checking one target against one contract."""

    target: str
    contract: Contract
    examples: int
    elapsed_s: float
    findings: list[Finding]
    misuse_findings: list[Finding] = field(default_factory=list)
    misuse_examples: int = 0
    de_facto: dict[str, int] = field(default_factory=dict)
    graded_cases: int = 0
    seed: int | None = None
    convention: probe.Convention | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "fail" if self.findings or self.misuse_findings else "pass"

    def de_facto_semantics(self) -> str:
        """The gradient contract(s) the gradients matched in every case that had gradients.

        ``local=sum=mean`` means no drawn case told them apart; ``none of them`` means no
        single contract explains every case.
        """
        if not self.graded_cases:
            return "n/a"
        always = [c for c in ("local", "sum", "mean") if self.de_facto.get(c, 0) == self.graded_cases]
        return "=".join(always) if always else "none of them"

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "verdict": self.verdict,
            "examples": self.examples,
            "elapsed_s": round(self.elapsed_s, 3),
            "violations": [f.to_json() for f in self.findings + self.misuse_findings],
            "contract": self.contract.describe(),
            "convention": None if self.convention is None else self.convention.describe(),
            "notes": self.notes,
            "de_facto_gradient": self.de_facto_semantics(),
        }


def run_check(
    target: str,
    contract: Contract,
    *,
    max_examples: int | None = None,
    duration_s: float | None = None,
    seed: int | None = None,
    timeout: float = 10.0,
    probe_misuse: bool = False,
    pool: RankSets | None = None,
    track_semantics: bool = False,
    on_example: Callable[[Progress], None] | None = None,
    base_settings: settings | None = None,
    shrink_budget_s: float = 60.0,
    bits: bool = True,
    probed: probe.Probe | None = None,
) -> CheckReport:
    """Check ``target`` against ``contract`` on real process groups; shrink every failure.

    First the calling-convention probe (:mod:`harness.probe`) decides how to call the target
    and read its result (a misfit raises :class:`~harness.conventions.Misfit`; a target that
    fails on the probe case itself is reported at once).  ``duration_s`` replaces the example
    count with a time budget: batches of examples run until it is spent or something fails.
    ``shrink_budget_s`` bounds the time spent shrinking after the first failure; ``bits``
    checks raw-byte identity on top of value equality.  The active Hypothesis profile
    supplies the rest.  ``probed``: the probe's result when the caller already ran it.
    """
    pool = pool or shared_pool(timeout)
    backend, device = contract.backends[0], contract.devices[0]
    caps = capabilities.measure(pool, backend, device)
    dtypes = tuple(d for d in contract.dtypes if caps.supports(d))
    if not dtypes:
        raise UsageError(f"--dtypes: none of {', '.join(contract.dtypes)} is supported by {backend}/{device} "
                         f"(supported: {', '.join(caps.gather_dtypes())})")
    started = time.monotonic()
    probed = probed or probe.probe(pool, target, contract, strategies.simplest_first(dtypes)[0], timeout=timeout)
    contract, call = probed.contract, probed.convention.call
    report = CheckReport(target, contract, 0, 0.0, [], seed=seed, convention=probed.convention, notes=probed.notes)
    if probed.failed is not None:
        report.examples = 1
        report.findings = [_finding(probed.failed.case, check_outcome(probed.failed, bits=bits))]
        report.findings[0].call, report.findings[0].repeat, report.findings[0].bits = call, False, bits
        report.elapsed_s = time.monotonic() - started
        return report
    progress = Progress()
    semantics: collections.Counter[str] = collections.Counter()  # "" counts the graded cases
    case_strategy = strategies.cases(contract=contract, dtypes=dtypes, backend=backend, device=device)
    key = f"{target}|{contract.describe()}".encode()
    judge = _Judge(pool, target, call, timeout, bits, semantics if track_semantics else None)
    report.findings = _search(case_strategy, judge.in_contract, progress, on_example, max_examples, duration_s, seed,
                              base_settings, key, shrink_budget_s)
    report.examples = progress.examples
    for finding in report.findings:
        finding.call, finding.bits = call, bits
    report.graded_cases = semantics.pop("", 0)
    report.de_facto = dict(semantics)
    if probe_misuse and strategies.has_misuse(contract, caps.gather_dtypes()):
        misuse_progress = Progress()
        misuse_strategy = strategies.misuse_cases(contract=contract, dtypes_supported=caps.gather_dtypes())
        report.misuse_findings = _search(misuse_strategy, judge.out_of_contract, misuse_progress, on_example,
                                         max_examples, duration_s, seed, base_settings, key + b"|misuse",
                                         shrink_budget_s)
        report.misuse_examples = misuse_progress.examples
        for finding in report.misuse_findings:
            finding.call, finding.bits = call, bits
    report.elapsed_s = time.monotonic() - started
    return report


@dataclass
class _Judge:
    """Runs one case on the pool and names the properties it breaks (in or out of contract)."""

    pool: RankSets
    target: str
    call: Call
    timeout: float
    bits: bool
    semantics: collections.Counter | None

    def in_contract(self, case: Case) -> list[Violation]:
        outcome = self.pool.run(case, self.target, call=self.call, timeout=self.timeout)
        if self.semantics is not None and case.grad != "none":
            matched = matching_contracts(outcome)
            if matched is not None:
                self.semantics.update(matched | {""})
        _note_outcome(outcome)
        return check_outcome(outcome, bits=self.bits)

    def out_of_contract(self, case: Case) -> list[Violation]:
        outcome = self.pool.run(case, self.target, call=self.call, timeout=self.timeout)
        _note_outcome(outcome)
        return check_misuse(outcome)


def _finding(case: Case, violations: list[Violation]) -> Finding:
    first = violations[0]
    return Finding(first.property, first.kind, case, format_violations(case, violations), violations)


def _search(
    case_strategy: SearchStrategy[Case],
    judge: Callable[[Case], list[Violation]],
    progress: Progress,
    on_example: Callable[[Progress], None] | None,
    max_examples: int | None,
    duration_s: float | None,
    seed: int | None,
    base_settings: settings | None,
    database_key: bytes,
    shrink_budget_s: float,
) -> list[Finding]:
    """Run Hypothesis over ``case_strategy`` and return one minimal finding per property.

    Shrinking a failure that hangs or crashes costs a real wait per step; after
    ``shrink_budget_s`` from the first failure, unseen candidates count as passing, so
    Hypothesis stops shrinking and reports the smallest failure found so far.
    """
    found: dict[str, Finding] = {}
    failed: dict[Case, Finding] = {}
    first_failure_at: list[float] = []

    def fail(finding: Finding) -> None:
        found[finding.property] = finding
        progress.failures = len(found)
        raise VIOLATION_TYPES[finding.property](finding.message)

    def body(case: Case) -> None:
        if first_failure_at and time.monotonic() - first_failure_at[0] > shrink_budget_s:
            if case in failed:  # out of shrinking time: replay only what is known to fail
                fail(failed[case])
            return
        progress.examples += 1
        progress.current = case
        for label in strategies.coverage_events(case):
            event(label)
        violations = judge(case)
        if on_example is not None:
            on_example(progress)
        if violations:
            failed[case] = _finding(case, violations)
            first_failure_at[:] = first_failure_at or [time.monotonic()]
            fail(failed[case])

    active = profiles.keyed(base_settings or settings(), database_key)  # one share per target and contract
    batch = max_examples or active.max_examples
    deadline = None if duration_s is None else time.monotonic() + duration_s
    run = 0
    while True:
        test = settings(active, max_examples=batch if deadline is None else min(batch, 200))(given(case_strategy)(body))
        if seed is not None:
            test = hypothesis.seed(seed + run)(test)
        try:
            test()
        except PropertyViolation:
            pass
        except BaseExceptionGroup as group:  # several properties failed: all are in ``found``
            _reraise_unless_violations(group)
        run += 1
        if found or deadline is None or time.monotonic() >= deadline:
            break
    return [found[p] for p in PROPERTIES if p in found]


def _reraise_unless_violations(group: BaseExceptionGroup) -> None:
    rest = group.subgroup(lambda exc: not isinstance(exc, (PropertyViolation, BaseExceptionGroup)))
    if rest is not None:
        raise rest


def format_violations(case: Case, violations: list[Violation]) -> str:
    """The counterexample text: the property, the case line, and what each rank got."""
    first = violations[0]
    lines = [f"property violated: {first.property} ({first.kind})", f"case: {case.describe()}"]
    lines += ["  " + v.describe().replace("\n", "\n  ") for v in violations[:8]]
    if len(violations) > 8:
        lines.append(f"  … and {len(violations) - 8} more violation(s)")
    return "\n".join(lines)


def _note_outcome(outcome: Outcome) -> None:
    """Per-rank shapes and errors as Hypothesis notes: printed with the minimal example."""
    case = outcome.case
    note(f"case: {case.describe()}")
    for result in outcome.results:
        if result is None:
            continue
        shapes = [None if piece is None else tuple(piece.shape) for piece in result.output or []]
        note(f"rank {result.rank}: output shapes {shapes}, collectives {result.collectives}"
             + (f", raised {result.error_type} in {result.error_phase}" if result.error else ""))


__all__ = ["CheckReport", "Finding", "Progress", "PropertyViolation", "VIOLATION_TYPES", "format_violations",
           "run_check"]
