"""One search's session: runs cases on the pool, judges them, and keeps what it saw.

:func:`harness.search.engine.run_check` builds a session from its settings and hands its
findings back; the session does the search's three steps (strata, Hypothesis, confirmation:
see :mod:`harness.search.engine`), through the batch engine where cases run in batches
(:mod:`harness.search.batches`), and shrinking stops where :mod:`harness.search.shrinking` says.

One concern: the search loop's state (what ran, what failed, what was put aside) and the
steps that change it.
"""

from __future__ import annotations

import collections
import functools
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import hypothesis
from hypothesis import event, given, note, settings
from hypothesis.errors import FlakyFailure
from hypothesis.strategies import SearchStrategy

from harness import strategies
from harness.core.case import Case
from harness.core.checks import (
    PROPERTIES,
    check_misuse,
    check_outcome,
    matching_contracts,
    outcome_notes,
    precompute_reference,
)
from harness.core.compare import Violation
from harness.core.contract import COLLECTIVES, MAX_WORLD_SIZE, is_mesh_layout
from harness.core.conventions import Call
from harness.pool.faults import Outcome
from harness.pool.pool import Pool
from harness.pool.rankset import BatchRun
from harness.search import confirm
from harness.search.batches import BatchEngine, failing, taken
from harness.search.finding import Finding, finding_of
from harness.search.results import Progress
from harness.search.shrinking import (
    BUCKETS,
    PropertyViolation,
    ShrinkClock,
    kept_violation,
    reraise_unless_violations,
)
from harness.settings import profiles
from harness.strategies import space

if TYPE_CHECKING:
    from harness.search.engine import SearchSettings

#: The stability calls (companion input, same input again) run on one drawn example in this many.
REPEAT_EVERY = 4
#: How many examples a search within a failing stratum may draw to find it again and shrink it ...
REFIND_EXAMPLES = 100
#: ... after a search among every case, where a failure not confined to the stratum's path shrinks furthest.
REFIND_ANYWHERE = 50
#: A search that goes on after putting an unreproduced hang aside draws from seeds this far on.
RESUMED_SEED_STEP = 1_000_003



#: With batches (the fuzz engine), Hypothesis draws this many examples of a search first (its
#: example database's failures among them), then batches take the rest of the budget
#: (:class:`harness.search.batches.BatchEngine`).
SWEEP_SEARCH_EXAMPLES = 50
#: A finding's ``found_by`` when a batch met it ...
BATCHES = "the fuzz engine's batches"
#: ... when a stratum met it, in a batch or not ...
STRATA = "the stratified examples"
#: ... and when a batch of Hypothesis's draws met it, and the usual run of them did not.
DRAWN = "Hypothesis's examples, in batches"
#: Failures each try of which waits for a timeout or a new rank set: not moved to fewer ranks.
_STALLS = frozenset({"hang", "crash", "desync"})


class _HarnessFailed(BaseException):
    """Carries an exception of the harness itself (a set that will not start, a bug) out of the
    Hypothesis test: a ``BaseException``, so Hypothesis stops at once instead of shrinking it."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


@dataclass
class _Session:
    """One search: runs cases on the pool, judges them, and keeps what it saw."""

    pool: Pool
    target: str
    call: Call
    bits: bool
    config: SearchSettings
    settings: settings
    on_example: Callable[[Progress], None] | None
    semantics: collections.Counter[str] | None
    progress: Progress = field(default_factory=Progress)
    #: What the target left behind (:attr:`Outcome.leaks`) -> how many cases, and the first of them.
    leaks: dict[str, tuple[int, Case]] = field(default_factory=dict)
    #: A misuse search: replays judge a case as misuse (every rank must raise in time).
    misuse: bool = False
    failing: bool = False
    last: Outcome | None = None
    #: Notes on what the cases showed without breaking a property (:func:`harness.core.checks.outcome_notes`).
    notes: list[str] = field(default_factory=list)
    #: Failures put aside: hangs and crashes that no replay reproduced (:meth:`Finding.attributed`).
    unattributed: list[Finding] = field(default_factory=list)
    #: How many times the search went on after putting such failures aside (each time from a new seed).
    resumed: int = 0
    #: The contract's smallest world: :meth:`fewest_ranks` goes no lower (a torchrun job has one size).
    fewest_world: int = 1
    #: The contract passes a 2-D mesh's groups: :meth:`fewest_ranks` tries no layout that is none.
    mesh: bool = False
    #: The contract's cases may be ragged: else :meth:`fewest_ranks` tries no ragged case (a length
    #: moved onto another member, a rank that held a filler length joining a group).
    ragged: bool = True
    #: Where the search's batches run: the fuzz engine's sweep, the strata, draws run ahead.
    batches: BatchEngine = field(init=False)

    def __post_init__(self) -> None:
        self.batches = BatchEngine(self.pool, self.target, self.call, self.bits, self.config.timeout_s, self.progress,
                                   self.notes, self.semantics, self._repeats, self._count_semantics, self.on_example)

    # -- judging one case ---------------------------------------------------------------------------
    def judge(self, case: Case) -> list[Violation]:
        """Run ``case`` in contract; note what it matched; forget the target's state after a failure."""
        outcome = self._run(case, self._repeats(case))
        if self.semantics is not None and case.grad != "none" and confirm.uniform_layouts(case):
            self._count_semantics(case, matching_contracts(outcome, _unrefuted(self.semantics, case)))
        return self._judged(outcome, check_outcome(outcome, bits=self.bits))

    def _count_semantics(self, case: Case, matched: frozenset[str] | None) -> None:
        """Count the gradient contracts a case's gradients matched (``None``: it says nothing of them)."""
        if self.semantics is not None and matched is not None and confirm.uniform_layouts(case):
            self.semantics.update(matched | {""})

    def judge_misuse(self, case: Case) -> list[Violation]:
        outcome = self._run(case, repeat=False)
        return self._judged(outcome, check_misuse(outcome))

    def _run(self, case: Case, repeat: bool) -> Outcome:
        self.progress.examples += 1
        self.progress.current = case
        self.last = self.pool.run(case, self.target, call=self.call, repeat=repeat, timeout=self.config.timeout_s,
                                  diagnose=False,  # the confirmation's replay collects stacks and logs
                                  meanwhile=functools.partial(precompute_reference, case, stability=repeat))
        return self.last

    def _judged(self, outcome: Outcome, violations: list[Violation]) -> list[Violation]:
        _note_outcome(outcome)
        for leak in outcome.leaks:
            count, first = self.leaks.get(leak, (0, outcome.case))
            self.leaks[leak] = (count + 1, first)
        self.progress.seen.append((outcome.case, violations[0].property if violations else None))
        self.notes += [note for note in outcome_notes(outcome) if note not in self.notes]
        if violations and not outcome.fault:
            self.pool.after_failure(outcome)  # the next verdict must not rest on what this call left
        if self.on_example is not None:
            self.on_example(self.progress)
        return violations

    def leak_notes(self) -> list[str]:
        """A note per kind of leak: not a property (the answer can still be right), but the
        ranks had to be replaced after every such case, and in a training job it accumulates."""
        return [f"the target left {leak} after {count} case(s), first: {first.describe()}; "
                f"those ranks were replaced" for leak, (count, first) in self.leaks.items()]

    def _repeats(self, case: Case) -> bool:
        """Whether the stability calls run on ``case``: always once anything failed, else a sample
        chosen by the case itself (a shrinking step or a replay of it makes the same calls)."""
        return self.failing or zlib.crc32(case.to_json().encode()) % REPEAT_EVERY == 0

    def _finding(self, case: Case, violations: list[Violation], repeat: bool) -> Finding:
        finding = finding_of(case, violations)
        finding.call, finding.bits, finding.repeat = self.call, self.bits, repeat
        finding.seen_after = self.last.history if self.last is not None else ()
        return finding

    # -- the steps of a search -------------------------------------------------------------------------
    def probe_failed(self, outcome: Outcome, strategy: SearchStrategy[Case]) -> list[Finding]:
        """The target failed on the probe's own case: shrunk like a failing stratum (among cases of
        the probe's dtype), so the minimal case does not depend on whether the probe hit it first."""
        self.progress.examples += 1
        violations = check_outcome(outcome, bits=self.bits)
        self.progress.seen.append((outcome.case, violations[0].property))
        self.last = outcome
        return self._refind(strategy, self._finding(outcome.case, violations, repeat=False),
                            found_by="the calling-convention probe's own case")

    def find(self, layers: list[strategies.Stratum], strategy: SearchStrategy[Case],
             judge: Callable[[Case], list[Violation]], budget: int, deadline: float | None, *,
             up_to: Callable[[int], SearchStrategy[Case]] | None = None,
             sweep: Iterator[strategies.Stratum] | None = None) -> list[Finding]:
        """The strata, then Hypothesis, until a failure the replays tie to the target or the budget is spent.

        A hang or crash that no replay reproduces is put aside (:attr:`unattributed`), and the
        search goes on with the rest of the strata and of the budget, from a new seed: a check
        must not end, failed or passed, on the machine's hiccup.  ``up_to(W)``: every case on at
        most W ranks, where a failing stratum is searched again (``strategy`` without it).
        ``sweep``: Hypothesis draws :data:`SWEEP_SEARCH_EXAMPLES` only, and batches of these
        strata take the rest of the budget (:meth:`sweep`).
        """
        within = up_to or (lambda world: strategy)
        while True:
            drawn = self.strata_ahead(layers, within) if self._ahead(judge) else self.strata(layers, within)
            left = max(1, budget - self.progress.searched)
            if not drawn and sweep is None:
                drawn = self.search(strategy, judge, left, deadline, up_to=within)
            elif not drawn and sweep is not None:
                drawn = (self.search(strategy, judge, min(left, SWEEP_SEARCH_EXAMPLES), None, up_to=within)
                         or self.sweep(sweep, within, budget, deadline))
            findings = self.confirmed([self.fewest_ranks(finding, judge) for finding in drawn])
            spent = self.progress.searched >= budget if deadline is None else time.monotonic() >= deadline
            if findings or not drawn or spent:
                return findings
            self.resumed += 1

    def fewest_ranks(self, finding: Finding, judge: Callable[[Case], list[Violation]]) -> Finding:
        """``finding`` on the fewest ranks that still break its property: a rank taken away, or its
        length moved onto the member before it (:meth:`Case.merged`), one at a time, the first
        that still fails kept; at most W(W-1) cases.  Hypothesis shrinks by deleting choices, and
        cannot drop a rank together with its place in a group layout, nor trade two short ranks
        for one long one; a hang, crash or desync is left as found, since every try of one waits
        for a timeout or a fresh rank set."""
        if finding.kind in _STALLS or self.misuse:  # a misuse case with a rank fewer may be in contract
            return finding
        self.failing = True  # the stability calls, as while shrinking
        smaller = finding
        while True:
            for case in (c for r in range(smaller.case.world_size) for c in (smaller.case.without(r),
                                                                             smaller.case.merged(r))):
                if (case is None or case.world_size < self.fewest_world or not self.ragged and case.is_ragged
                        or self.mesh and not is_mesh_layout(case.groups, case.world_size)):
                    continue  # out of the contract: its failure would be no finding of the target's
                self.progress.shrink_steps += 1
                violations = [v for v in judge(case) if BUCKETS[v.property] == BUCKETS[finding.property]]
                if violations and violations[0].kind not in _STALLS:
                    smaller = replace(self._finding(case, violations, repeat=True), found_by=finding.found_by,
                                      shrink_cut=finding.shrink_cut, shrink_cut_s=finding.shrink_cut_s,
                                      inconsistent=finding.inconsistent)
                    break
            else:
                self.failing = False
                return smaller

    def confirmed(self, findings: list[Finding]) -> list[Finding]:
        """``findings`` replayed (:func:`harness.search.confirm.confirm`); those the replays do not tie to
        the target are put aside in :attr:`unattributed`, the rest returned."""
        replay = self.replayer()
        for finding in findings:
            confirm.confirm(finding, replay)
            if self.call.compiled and finding.attributed():
                finding.condition = "; ".join(filter(None, (finding.condition, self._compile_only(finding))))
        self.unattributed += [finding for finding in findings if not finding.attributed()]
        return [finding for finding in findings if finding.attributed()]

    def _compile_only(self, finding: Finding) -> str:
        """Under ``--compile``: whether the finding's case passes when the target is called
        eagerly, on fresh ranks after the same history (then the bug is the compiled code's)."""
        eager = replace(self.call, compiled=False)
        self.pool.fresh(finding.case)
        for earlier, repeat in finding.history:
            self.pool.run(earlier, self.target, call=eager, repeat=repeat, timeout=self.config.timeout_s)
        outcome = self.pool.run(finding.case, self.target, call=eager, repeat=True, timeout=self.config.timeout_s)
        self.pool.fresh(finding.case)
        if outcome.fault or check_outcome(outcome, bits=self.bits):
            return ""
        return "compile-only: the same case passes when the target is called eagerly (without --compile)"

    def strata(self, layers: list[strategies.Stratum], up_to: Callable[[int], SearchStrategy[Case]], *,
               source: str = STRATA) -> list[Finding]:
        """Each stratum's typical case, with the stability calls; a failure is searched again among
        every case on no more ranks than still fail it (``up_to``), and if not met there, within
        its stratum, and shrunk where it was met.  Strata are taken off ``layers`` as they run: a
        search that goes on resumes there."""
        while layers:
            layer = layers.pop(0)
            self.failing = True  # strata always make the stability calls
            violations = self.judge(layer.case)
            self.failing = False
            if violations:
                failed = self._finding(layer.case, violations, repeat=True)  # now: what ran before it is its history
                # Hypothesis shrinks a failure met on four ranks mostly on four ranks (the rest of the
                # case means something else on fewer): searched among cases on as few as fail, its
                # shrinking starts small, and takes half the steps (the catalogue's stratum failures)
                fewest = self.fewest_ranks(failed, self.judge).case.world_size
                world = fewest if fewest < layer.case.world_size else MAX_WORLD_SIZE  # no fewer: every case
                return self._refind(layer.strategy, failed, found_by=f"{source} ({layer.label})",
                                    anywhere=up_to(world))
        return []

    def _ahead(self, judge: Callable[[Case], list[Violation]]) -> bool:
        """Whether cases run in batches before anything failed (:attr:`SearchSettings.ahead`): in
        contract only, where the ranks judge a case as :meth:`judge` does."""
        return self.config.ahead and not self.misuse and not self.failing and judge == self.judge

    def strata_ahead(self, layers: list[strategies.Stratum], up_to: Callable[[int], SearchStrategy[Case]]) -> list[Finding]:
        """:meth:`strata` in batches judged on the ranks, each stratum with the stability calls.

        A batch holds one layout's strata, so batches do not run in the schedule's order: once
        one does not pass, the strata no batch passed go back to the usual :meth:`strata`, in
        the schedule's order, which meets the first failing one as it would have and searches
        it again.  Where it meets none (a failure after what the batch's ranks had run), the
        batch's is run again after that history (:meth:`_batch_failed`).  Strata are taken off
        ``layers`` as they pass.
        """
        place = {id(layer): n for n, layer in enumerate(layers)}
        pending: dict[tuple, list[strategies.Stratum]] = {}
        unmet: list[tuple[list[strategies.Stratum], BatchRun]] = []

        def failed(batch: list[strategies.Stratum], run: BatchRun) -> None:
            unmet.append((batch, run))

        self.batches.run(taken(layers), pending, failed, spent=lambda: bool(unmet), always_repeat=True)
        if not unmet:
            return []
        back = [layer for batch, _ in unmet for layer in batch] + [layer for held in pending.values() for layer in held]
        layers[:] = sorted([*back, *layers], key=lambda layer: place[id(layer)])
        found = self.strata(layers, up_to)
        batch, run = unmet[0]
        return found or self._batch_failed(failing(batch, run), run, up_to, source=STRATA)

    def sweep(self, source: Iterator[strategies.Stratum], up_to: Callable[[int], SearchStrategy[Case]],
              budget: int, deadline: float | None) -> list[Finding]:
        """Batches of ``source``'s cases until the deadline (else the budget) is spent or one fails: the fuzz engine.

        The ranks run a batch's cases back to back and judge each themselves, the reference
        computed there (:meth:`harness.pool.pool.Pool.run_batch`); only a summary comes back.  A
        batch that did not pass in full is run again the usual way, case by case up to the one
        that failed (all of them where a fault hides which), as strata (:meth:`_batch_failed`):
        the first to fail there is searched again, shrunk and confirmed as a failing stratum
        is, so a finding, its minimal case and its repro are what the usual search gives.  A
        batch whose failure no usual run shows is left: the batches go on.
        """
        def spent() -> bool:
            return time.monotonic() >= deadline if deadline is not None else self.progress.searched >= budget

        def failed(batch: list[strategies.Stratum], run: BatchRun) -> list[Finding] | None:
            return self._batch_failed(failing(batch, run), run, up_to) or None

        return self.batches.run(source, {}, failed, spent=spent, budget=None if deadline is not None else budget) or []

    def _batch_failed(self, failing: list[strategies.Stratum], run: BatchRun,
                      up_to: Callable[[int], SearchStrategy[Case]], *, source: str = BATCHES) -> list[Finding]:
        """A batch that did not pass, run again the usual way as strata: from fresh ranks, then (where
        that shows nothing) after what its ranks had run before it, as a history-dependent failure
        needs; the first case to fail is searched again and shrunk (:meth:`strata`).  A hang, crash
        or desync that neither shows is the case the ranks said they were on, as the search met
        it: the confirmation replays it, and puts it aside if it never comes back."""
        self.pool.fresh(failing[0].case)
        found = self.strata(list(failing), up_to, source=source)
        if not found and run.history:
            self.pool.fresh(failing[0].case)
            for earlier, repeat in run.history:
                self.pool.run(earlier, self.target, call=self.call, repeat=repeat, timeout=self.config.timeout_s)
            found = self.strata(list(failing), up_to, source=source)
        if found or run.fault is None or run.passed is None:
            return found
        case = failing[run.passed].case
        finding = finding_of(case, [Violation("no-hang-no-crash", run.fault, None,
                                              f"{run.fault}: in a batch, on this case (run again alone, it passed)")])
        finding.call, finding.bits, finding.found_by = self.call, self.bits, f"{source} (a batch)"
        finding.seen_after = (*run.history, *((layer.case, True) for layer in failing[: run.passed]))
        return [finding]

    def _refind(self, strategy: SearchStrategy[Case], unshrunk: Finding, *, found_by: str,
                anywhere: SearchStrategy[Case] | None = None) -> list[Finding]:
        """Search ``anywhere`` (every case: where the smallest failure lies, when the failure is not
        confined to a path), then ``strategy`` (the cases like ``unshrunk``'s, which failed) for
        that failure again, and shrink it where it was met; ``unshrunk`` itself is reported if
        neither search fails."""
        found = [] if anywhere is None else self.search(anywhere, self.judge, REFIND_ANYWHERE, None,
                                                         after_failure=True)
        found = found or self.search(strategy, self.judge, REFIND_EXAMPLES, None, after_failure=True)
        for finding in found or [unshrunk]:
            finding.found_by = found_by
        if not found:  # reported as drawn: the search within the stratum did not fail again
            unshrunk.shrink_cut_s, unshrunk.shrink_cut = 0.0, "before shrinking: a search within its stratum did not fail again"
        return found or [unshrunk]

    def search(self, strategy: SearchStrategy[Case], judge: Callable[[Case], list[Violation]], budget: int,
               deadline: float | None, *, after_failure: bool = False,
               up_to: Callable[[int], SearchStrategy[Case]] | None = None) -> list[Finding]:
        """Run Hypothesis over ``strategy`` and return one minimal finding per property.

        Shrinking a failure that hangs costs a timeout per step; once those waits since the
        first failure add up to ``shrink_budget_s`` (or the shrinking itself to ten times
        that, or :data:`harness.search.shrinking.MAX_SHRINK_STEPS` steps), unseen candidates count as passing: Hypothesis stops and reports the smallest
        failure so far, marked as not fully shrunk.

        Drawn ahead (:attr:`SearchSettings.ahead`), each run of the test first only collects the
        cases Hypothesis draws (:meth:`_run_ahead`): with one seed it draws the same ones
        whatever the test does with them, so long as it passes them all.  They run in batches;
        if one fails, the run is made again the usual way, which meets that failure where it
        would have met it, and shrinks it.
        """
        found: dict[str, Finding] = {}
        failed: dict[Case, Finding] = {}
        clock = ShrinkClock(self.config.shrink_budget_s, fault_steps=self.config.shrink_fault_steps,
                             max_steps=self.config.max_shrink_steps)
        self.failing = after_failure
        collected: list[Case] | None = None  # drawing ahead: the test only collects its cases

        def body(case: Case) -> None:
            if collected is not None:
                collected.append(case)
                return
            if clock.out_of_time():
                if case in failed:  # out of shrinking time: replay only what is known to fail
                    raise kept_violation(failed[case], found, self.progress)
                return
            for label in space.events(case):
                event(label)
            repeat = self._repeats(case)
            if after_failure or clock.first_failure is not None:
                self.progress.shrink_steps += 1  # shrinking, or finding a known failure again
            started = time.monotonic()
            try:
                violations = judge(case)
            except Exception as error:  # the harness's own: stop now, never shrink it as the target's
                raise _HarnessFailed(error) from error
            if violations:
                clock.failed(time.monotonic() - started, violations[0].kind)
                self.failing = True
                failed[case] = self._finding(case, violations, repeat)
                raise kept_violation(failed[case], found, self.progress)

        run = 0
        inconsistent = False
        ahead = self._ahead(judge)
        while True:
            batch = budget if deadline is None else min(budget, 200)
            # ``seed`` first: it switches the database off, and the settings applied after it
            # (ours, with the database) replace that; saved failures are replayed first.
            seed = (self.config.seed or 0) + run + RESUMED_SEED_STEP * self.resumed
            test = settings(self.settings, max_examples=batch)(hypothesis.seed(seed)(given(strategy)(body)))
            unmet: list[strategies.Stratum] = []  # what a batch failed on, if the usual run does not fail
            met: BatchRun | None = None
            if ahead:
                collected = []
                settings(profiles.read_only(self.settings), max_examples=batch)(
                    hypothesis.seed(seed)(given(strategy)(body)))()
                drawn, collected = collected, None
                passed, unmet, met = self._run_ahead(drawn, strategy, deadline)
                if passed:
                    run += 1
                    if deadline is None or time.monotonic() >= deadline:
                        break
                    continue
                ahead = False  # the usual run, from here on
            try:
                test()
            except PropertyViolation:
                pass
            except _HarnessFailed as failed:
                raise failed.error from None
            except BaseExceptionGroup as group:  # several properties failed: all are in ``found``
                inconsistent = isinstance(group, FlakyFailure)
                reraise_unless_violations(group)
            if met is not None and not found:  # met in a batch only (what its ranks had run before it?): as the sweep does
                self.failing = False
                return self._batch_failed(unmet, met, up_to or (lambda world: strategy), source=DRAWN)
            run += 1
            if found or deadline is None or time.monotonic() >= deadline:
                break
        self.failing = False
        for finding in found.values():
            finding.shrink_cut_s, finding.shrink_cut, finding.inconsistent = (
                clock.cut_after_s, clock.cut_reason, inconsistent)
        return sorted(found.values(), key=lambda finding: PROPERTIES.index(finding.property))

    def _run_ahead(self, drawn: list[Case], strategy: SearchStrategy[Case], deadline: float | None
                   ) -> tuple[bool, list[strategies.Stratum], BatchRun | None]:
        """Run Hypothesis's ``drawn`` cases in batches (:meth:`BatchEngine.run`): whether all passed
        (or the deadline came first); else what failed (the batch up to the failing case, as
        strata of ``strategy``) and how that batch went.  After a failure what the batches
        counted is taken back: the usual run that follows counts its cases itself."""
        mark = (self.progress.examples, len(self.progress.seen), None if self.semantics is None else self.semantics.copy())
        unmet: list[tuple[list[strategies.Stratum], BatchRun]] = []

        def failed(batch: list[strategies.Stratum], run: BatchRun) -> list[Finding]:
            unmet.append((failing(batch, run), run))
            return []  # the rest is the usual run's

        def spent() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        layers = (strategies.Stratum(DRAWN, case, strategy) for case in drawn)
        self.batches.run(layers, {}, failed, spent=spent)
        if not unmet:
            return True, [], None
        self.progress.examples, seen, semantics = mark
        del self.progress.seen[seen:]
        if semantics is not None and self.semantics is not None:
            self.semantics.clear()
            self.semantics.update(semantics)
        cases, run = unmet[0]
        return False, cases, run

    # -- replays for the confirmation -------------------------------------------------------------------
    def replayer(self) -> confirm.Replay:
        """Run a case on fresh ranks after a history, and judge it alone (in contract, or as misuse)."""
        misuse = self.misuse

        def replay(case: Case, history: Sequence[tuple[Case, bool]]) -> list[Violation]:
            self.pool.fresh(case)
            for earlier, repeat in history:
                self.pool.run(earlier, self.target, call=self.call, repeat=repeat, timeout=self.config.timeout_s)
            outcome = self.pool.run(case, self.target, call=self.call, repeat=not misuse,
                                    timeout=self.config.timeout_s)
            violations = check_misuse(outcome) if misuse else check_outcome(outcome, bits=self.bits)
            if violations and not outcome.fault:
                self.pool.after_failure(outcome)
            return violations

        return replay


def _unrefuted(semantics: collections.Counter[str], case: Case) -> list[str]:
    """The gradient contracts every graded case so far matched (``semantics[""]`` counts those
    cases): only those can be de facto (:meth:`~harness.search.results.CheckReport.de_facto_semantics`),
    so only those are computed."""
    return [c for c in COLLECTIVES[case.collective].grads if semantics[c] == semantics[""]]


def _note_outcome(outcome: Outcome) -> None:
    """Per-rank shapes and errors as Hypothesis notes: printed with the minimal example."""
    if not hypothesis.currently_in_test_context():
        return  # a stratum or a replay, judged outside Hypothesis
    case = outcome.case
    note(f"case: {case.describe()}")
    for result in outcome.results:
        if result is None:
            continue
        shapes = [None if piece is None else tuple(piece.shape) for piece in result.output or []]
        note(f"rank {result.rank}: output shapes {shapes}, collectives {result.collectives}"
             + (f", raised {result.error_type} in {result.error_phase}" if result.error else ""))
