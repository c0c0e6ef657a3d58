"""A finding: the minimal counterexample for one property, and what is known about how it fails.

Beyond the case and the broken property, a finding says how far it can be trusted
(``status``): ``confirmed`` when it fails again alone on fresh ranks, ``history-dependent``
when it fails only after certain earlier cases ran on the same ranks (``history``),
``intermittent`` when it fails in some replays only, ``not reproduced`` when no replay failed;
under which condition it fails (``condition``, e.g. only when ranks' cotangent layouts
differ); and whether its shrinking was cut short (``shrink_cut_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.core.case import Case
from harness.core.compare import Violation
from harness.core.conventions import Call

#: Statuses whose findings are facts about every run (the report's table), not about some.
REPRODUCIBLE = ("confirmed", "history-dependent")
#: Fault kinds that carry nothing of the target's own: no traceback, no wrong bytes, no
#: collective it entered out of turn.  A busy machine (a rank stalled past the timeout, or
#: killed for memory) or the harness itself can produce them, so they count against the target
#: only once a replay has reproduced them.
UNEXPLAINED_KINDS = ("hang", "crash")


class UnreproducedFaultWarning(UserWarning):
    """A hang or crash was seen once but never again, alone or after its history: not counted."""


@dataclass
class Finding:
    """A minimal counterexample for one property."""

    property: str
    kind: str
    case: Case
    message: str
    violations: list[Violation]
    repro: str | None = None
    #: The short torch-only script beside ``repro`` (:mod:`harness.report.minimal_repro`).
    minimal_repro: str | None = None
    call: Call = field(default_factory=Call)
    repeat: bool = True
    bits: bool = True
    #: The earlier cases (with their ``repeat`` flags) it needs on the same ranks: history-dependent.
    history: tuple[tuple[Case, bool], ...] = ()
    #: The cases that had run on its ranks when it was first seen (where a history is looked for).
    seen_after: tuple[tuple[Case, bool], ...] = ()
    status: str = "unconfirmed"
    replays: tuple[int, int] = (0, 0)  # (failed, run) alone on fresh ranks
    condition: str = ""
    shrink_cut_s: float | None = None
    shrink_cut: str = ""
    #: Hypothesis saw a case pass and fail (or fail differently) when run again: it stopped shrinking
    #: there; the notes say what the replays showed, never a guess at why.
    inconsistent: bool = False
    #: Which fixed example failed first when not a drawn one: a stratum, or the probe's own case.
    found_by: str = ""
    #: One-line suggestions, each tested on the ranks (:mod:`harness.report.hints`).
    hints: list[str] = field(default_factory=list)

    def reproducible(self) -> bool:  # a method: the field ``property`` shadows the builtin here
        """Whether the finding fails on every run, alone or after its history."""
        return self.status in REPRODUCIBLE

    def attributed(self) -> bool:
        """Whether the replays tie this failure to the target: everything but a hang or crash
        that came back in no replay, alone on fresh ranks or after the cases that ran before it."""
        return not (self.kind in UNEXPLAINED_KINDS and self.status == "not reproduced")

    def warning(self) -> str:
        """Why an unattributed finding (see :meth:`attributed`) is not counted, in one line."""
        _, run = self.replays
        after = f", nor after the {len(self.seen_after)} case(s) that had run before it" if self.seen_after else ""
        return (f"a {self.kind} on {self.case.describe()} during the search is not counted: it never came back in "
                f"{run} replays alone on fresh ranks{after}, so nothing shows it is the target's (a busy machine "
                f"can stall or kill a rank); rerun with a larger --timeout to look again")

    def notes(self) -> list[str]:
        """What the search and the confirmation learned, one line each, for the report."""
        lines = []
        failed, run = self.replays
        if self.status == "history-dependent":
            lines.append(f"history-dependent: passes alone on fresh ranks ({run} replays); fails after "
                         f"{len(self.history)} earlier case(s) ran on the same ranks:")
            lines += [f"  {n}. {case.describe()}" for n, (case, _) in enumerate(self.history, 1)]
        elif self.status == "intermittent":
            lines.append(f"intermittent: failed again in {failed} of {run} replays alone on fresh ranks")
        elif self.status == "not reproduced":
            after = f" and after the {len(self.seen_after)} case(s) that ran before it" if self.seen_after else ""
            lines.append(f"not reproduced: passed in {run} replays alone on fresh ranks{after}; "
                         f"{self._why_not_reproduced()}")
        if self.condition:
            lines.append(self.condition)
        if self.found_by:
            lines.append(f"found first by {self.found_by}")
        if self.shrink_cut:
            lines.append(f"not fully shrunk: stopped {self.shrink_cut} ({self.shrink_cut_s or 0:.0f} s)")
        if self.inconsistent:
            lines.append("not fully shrunk: Hypothesis saw a case pass or fail differently when it ran it again, "
                         f"and stopped shrinking there; {self._what_replays_showed()}")
        lines += [f"hint: {hint}" for hint in self.hints]
        return lines

    def _what_replays_showed(self) -> str:
        """What the confirmation's replays say about a case the search saw flip: facts, no guess."""
        failed, run = self.replays
        if self.status == "history-dependent":
            return "the replays show why: it fails only after the earlier case(s) above"
        if self.status == "not reproduced":
            return f"this case failed in none of {run} replays"
        return f"alone on fresh ranks this case failed in {failed} of {run} replays"

    def _why_not_reproduced(self) -> str:
        if self.kind == "hang":
            return ("a hang that never came back may be the machine's, not the target's: a busy machine can "
                    "run past the case timeout; rerun with a larger --timeout to tell")
        if self.kind == "crash":
            return "a rank that died once may have been the machine's doing (killed for memory, say)"
        return ("what is shown above is what the target's own calls did in the search, once: a failure that "
                "comes and goes")

    def to_json(self) -> dict:
        return {"property": self.property, "kind": self.kind, "case": self.case.to_dict(),
                "case_line": self.case.describe(), "message": self.message, "repro": self.repro,
                "minimal_repro": self.minimal_repro,
                "status": self.status, "replays": list(self.replays), "condition": self.condition or None,
                "history": [{"case": case.to_dict(), "repeat": repeat} for case, repeat in self.history],
                "shrink_cut_s": self.shrink_cut_s, "shrink_cut": self.shrink_cut or None, "inconsistent": self.inconsistent, "notes": self.notes(),
                "call": {**self.call.to_dict(), "made": self.call.describe(self.case.passes_group)}}


def format_violations(case: Case, violations: list[Violation]) -> str:
    """The counterexample text: the property, the case line, and what each rank got."""
    first = violations[0]
    lines = [f"property violated: {first.property} ({first.kind})", f"case: {case.describe()}"]
    lines += ["  " + v.describe().replace("\n", "\n  ") for v in violations[:8]]
    if len(violations) > 8:
        lines.append(f"  … and {len(violations) - 8} more violation(s)")
    return "\n".join(lines)


def finding_of(case: Case, violations: list[Violation]) -> Finding:
    """A finding for ``case`` named after its first violation."""
    first = violations[0]
    return Finding(first.property, first.kind, case, format_violations(case, violations), violations)
