"""What a search keeps and hands back: its live counters (:class:`Progress`) and its verdict
with everything a report needs (:class:`CheckReport`).

:func:`harness.search.engine.run_check` fills them; the front ends (:mod:`harness.report.text`,
:mod:`harness.frontends.api`, :mod:`harness.frontends.commands`, the pytest plugin) read them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.core.case import Case
from harness.core.contract import Contract
from harness.search.coverage import Coverage

if TYPE_CHECKING:
    from harness.search.finding import Finding
    from harness.search.probe import Convention


@dataclass
class Progress:
    """Live counters for progress lines; ``current`` is the case being run.

    ``examples`` counts every case judged; ``shrink_steps`` those judged to shrink a failure
    (and to find a failing stratum's or probe case's failure again among cases like it); the
    rest are the search's own examples (:attr:`searched`, what ``--max-examples`` bounds).
    """

    examples: int = 0
    failures: int = 0
    started: float = field(default_factory=time.monotonic)
    current: Case | None = None
    #: Every case judged so far, with the property it broke (``None``: passed).
    seen: list[tuple[Case, str | None]] = field(default_factory=list)
    shrink_steps: int = 0

    @property
    def rate(self) -> float:
        return self.examples / max(1e-9, time.monotonic() - self.started)

    @property
    def searched(self) -> int:
        """The examples of the search itself: every case judged but the shrinking steps."""
        return self.examples - self.shrink_steps


@dataclass
class CheckReport:
    """The result of checking one target against one contract."""

    target: str
    contract: Contract
    #: The search's examples, strata included (what ``--max-examples`` bounds); ``shrink_steps``:
    #: the cases run to shrink a failure.  Together, every case the ranks ran (the
    #: confirmation's replays apart).
    examples: int
    elapsed_s: float
    findings: list[Finding]
    misuse_findings: list[Finding] = field(default_factory=list)
    misuse_examples: int = 0
    de_facto: dict[str, int] = field(default_factory=dict)
    graded_cases: int = 0
    seed: int | None = None
    convention: Convention | None = None
    notes: list[str] = field(default_factory=list)
    #: The notes that say how the target is called (the probe's: an optional group, a dim taken
    #: by position): in :attr:`notes` too, but they ask nothing of anyone, so pytest shows them
    #: under ``-v`` only, never as warnings.
    call_notes: tuple[str, ...] = ()
    coverage: Coverage = field(default_factory=Coverage)
    #: What the target left behind on its ranks (threads, open files), one line per kind.
    leaks: list[str] = field(default_factory=list)
    shrink_steps: int = 0
    #: Hangs and crashes seen in the search that no replay reproduced: not the target's, not counted.
    unattributed: list[Finding] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """One line per :attr:`unattributed` finding: what was seen, and why it does not count."""
        return [finding.warning() for finding in self.unattributed]

    @property
    def verdict(self) -> str:
        return "fail" if self.findings or self.misuse_findings else "pass"

    def de_facto_semantics(self) -> str:
        """The gradient contract(s) the gradients matched in every case that had gradients.

        Counted over cases whose ranks share one input and one cotangent layout (a failure
        that needs ranks to differ in layout is listed as a finding, with that condition).
        ``local=sum=mean`` means no drawn case told them apart; ``none of them`` means no
        single contract explains every case.
        """
        if not self.graded_cases:
            return "n/a"
        always = [c for c in self.contract.kind.grads if self.de_facto.get(c, 0) == self.graded_cases]
        return "=".join(always) if always else "none of them"

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "verdict": self.verdict,
            "examples": self.examples,
            "shrink_steps": self.shrink_steps,
            "elapsed_s": round(self.elapsed_s, 3),
            "violations": [f.to_json() for f in self.findings + self.misuse_findings],
            "contract": self.contract.describe(),
            "convention": None if self.convention is None else self.convention.describe(),
            "notes": self.notes,
            "leaks": self.leaks,
            "warnings": self.warnings(),
            "unattributed": [finding.to_json() for finding in self.unattributed],
            "de_facto_gradient": self.de_facto_semantics(),
            "coverage": self.coverage.to_json(),
        }
