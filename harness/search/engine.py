"""Search for counterexamples: strata and Hypothesis draw cases, the pool runs them, the checks judge.

This is the one engine behind the CLI's ``check``, the pytest plugin, the Python API and the
catalogue report.  A search runs in three steps:

1. **strata** (:mod:`harness.strategies._strata`): a pairwise schedule over the axes that choose
   a gather's code path (world size, dtype, shape, raggedness, layouts, values, groups), first,
   so a bug confined to a pair of them is found within the default budget, whatever the seed;
2. **Hypothesis** draws the rest of the budget; each property raises its own exception type,
   so Hypothesis tracks (and shrinks) a separate minimal counterexample per broken property
   (a rank that raised counts under its phase's property, however its peers fared, so a race
   between ranks cannot move a failure to another one); a stratum that failed is shrunk by a
   search within that stratum;
3. **confirmation** (:mod:`harness.search.confirm`): every finding is replayed alone on fresh ranks,
   after its history, with uniform layouts, and labelled with what that showed; a hang or
   crash that came back in no replay is not the target's as far as anything shows: it is put
   aside with a warning, and the search goes on with the rest of its budget.

Calls of the target are costly, so the companion and repeat calls of the stability
properties run on the strata and on one drawn example in :data:`harness.search.session.REPEAT_EVERY` (chosen by the
case itself, so a replay makes the same calls), and on every example once something failed.

One concern, the search loop: strata, Hypothesis, shrinking and when it stops (:class:`harness.search.shrinking.ShrinkClock`)
share one session's state (:mod:`harness.search.session`); the batches run in :mod:`harness.search.batches`, when shrinking stops
is :mod:`harness.search.shrinking`, and what a search hands back is :mod:`harness.search.results`.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import settings
from hypothesis.strategies import SearchStrategy

from harness import strategies
from harness.core.case import Case
from harness.core.checks import (
    IN_PLACE_NOTE,
)
from harness.core.contract import Contract
from harness.pool import capabilities
from harness.pool.pool import Pool, shared_pool
from harness.search import probe
from harness.search.coverage import Coverage
from harness.search.results import CheckReport, Progress
from harness.search.session import _Session
from harness.search.shrinking import (
    MAX_SHRINK_STEPS,
    VIOLATION_TYPES,
    PropertyViolation,
)
from harness.settings import profiles
from harness.settings.options import default

#: One example in this many, at least, is drawn by Hypothesis rather than the strata.
RANDOM_SHARE = 5
@dataclass(frozen=True)
class SearchSettings:
    """How one search runs, passed whole from the front ends to the engine.

    - ``max_examples`` (default: the profile's) counts strata and drawn examples together;
      ``duration_s`` replaces it with a time budget.
    - ``seed``: the search's seed (``None``: 0).
    - ``timeout_s``: per case; ranks not back after this long and idle are a hang (busy ones, slowed
      rather than stuck, get more: :class:`harness.pool.watch.Watch`).
    - ``probe_misuse``: also search misuse cases (out-of-contract input).
    - ``base_settings``: the Hypothesis settings to start from (``None``: Hypothesis' own).
    - ``shrink_budget_s`` bounds the time spent waiting on hangs while shrinking
      (see :meth:`_Session.search`).
    - ``shrink_fault_steps``: when set, shrinking is bounded by counts only: at most this many
      steps that hung, crashed or desynced, in place of ``shrink_budget_s`` and its wall-clock
      last resort, so a loaded machine shrinks to the same case as a quiet one (the catalogue
      report's); ``max_shrink_steps`` bounds the steps of every kind.
    - ``track_semantics``: count which gradient contracts the gradients matched
      (:meth:`CheckReport.de_facto_semantics`).
    - ``batches``: after the strata and a short Hypothesis search, cases drawn cheaply run in
      batches judged on the ranks (:meth:`_Session.sweep`): the fuzz engine.
    - ``ahead``: the strata, and Hypothesis's draws until something fails, run in batches judged
      on the ranks (:meth:`_Session.strata_ahead`, :meth:`_Session.search`); the same cases as
      case by case, and a failure met the usual way, so the same findings, in a third of the time.
    """

    max_examples: int | None = None
    duration_s: float | None = None
    seed: int | None = None
    timeout_s: float = default("timeout")
    probe_misuse: bool = default("probe_misuse")
    base_settings: settings | None = None
    shrink_budget_s: float = 30.0
    shrink_fault_steps: int | None = None
    max_shrink_steps: int = MAX_SHRINK_STEPS
    track_semantics: bool = True
    batches: bool = False
    ahead: bool = True


def run_check(
    target: str,
    contract: Contract,
    search: SearchSettings | None = None,
    *,
    pool: Pool | None = None,
    on_example: Callable[[Progress], None] | None = None,
    probed: probe.Probe | None = None,
    **changes: Any,
) -> CheckReport:
    """Check ``target`` against ``contract`` on real process groups; shrink and confirm every failure.

    First the calling-convention probe (:mod:`harness.search.probe`) decides how to call the target
    and read its result (a misfit raises :class:`~harness.core.errors.Misfit`; a failure on the
    probe case itself is shrunk like a failing stratum's, and ends the search unless its replays
    put it aside).  ``search`` says how (``changes``: fields of :class:`SearchSettings` to
    replace, for a caller that has none); ``contract.bits`` checks raw-byte identity on top of
    value equality.  ``probed``: the probe's result when the caller already ran it.
    """
    search = replace(search or SearchSettings(), **changes)
    pool = pool or shared_pool()
    backend, device = contract.backend, contract.device
    caps = capabilities.measure(pool, backend, device)
    dtypes = caps.drawable(contract.dtypes)
    started = time.monotonic()
    probed = probed or probe.probe(pool, target, contract, strategies.simplest_first(dtypes)[0],
                                 timeout_s=search.timeout_s)
    contract = probed.contract
    report = CheckReport(target, contract, 0, 0.0, [], seed=search.seed, convention=probed.convention,
                         notes=[*probed.notes, *probed.advice], call_notes=tuple(probed.notes),
                         coverage=Coverage.for_contract(contract, dtypes))
    active = profiles.keyed(profiles.for_the_pool(search.base_settings or settings()),
                            f"{target}|{contract.describe()}".encode())
    session = _Session(pool, target, probed.convention.call, contract.bits, search, active, on_example,
                       collections.Counter() if search.track_semantics else None,
                       fewest_world=contract.world_sizes[0], mesh=contract.mesh,
                       ragged=contract.ragged_cases)
    budget = search.max_examples or active.max_examples
    deadline = None if search.duration_s is None else time.monotonic() + search.duration_s
    if probed.failed is not None:
        shrunk = session.probe_failed(probed.failed, strategies.cases(
            contract=contract, dtypes=(probed.failed.case.dtype,), backend=backend, device=device))
        report.findings = session.confirmed([session.fewest_ranks(finding, session.judge) for finding in shrunk])
    if not report.findings:
        # by a budget of examples, a fifth of it at least is drawn at random; by a duration, every stratum runs
        strata_run = max(1, budget - budget // RANDOM_SHARE) if search.duration_s is None else None
        layers = strategies.strata(contract=contract, dtypes=dtypes, backend=backend, device=device,
                                   seed=search.seed or 0, count=strata_run)
        def up_to(world: int) -> SearchStrategy[Case]:
            """Every case of the contract on at most ``world`` ranks."""
            lo, hi = contract.world_sizes
            return strategies.cases(contract=contract.with_(world_sizes=(lo, max(lo, min(hi, world)))), dtypes=dtypes,
                                    backend=backend, device=device)

        sweep = strategies.random_strata(contract=contract, dtypes=dtypes, backend=backend, device=device,
                                         seed=search.seed or 0) if search.batches else None
        report.findings = session.find(layers, strategies.cases(contract=contract, dtypes=dtypes, backend=backend,
                                                                device=device), session.judge, budget, deadline,
                                       up_to=up_to, sweep=sweep)
    report.examples, report.shrink_steps = session.progress.searched, session.progress.shrink_steps
    report.leaks = session.leak_notes()
    written = any("inputs-untouched" in {finding.property, *(v.property for v in finding.violations)}
                  for finding in report.findings)
    # a note that the values stay the same has no place beside the violation showing they changed
    report.notes = [*report.notes, *(note for note in session.notes if not (written and note == IN_PLACE_NOTE))]
    report.unattributed = session.unattributed
    if search.probe_misuse and strategies.has_misuse(contract, caps.gather_dtypes()):
        misuse = _Session(pool, target, probed.convention.call, contract.bits, search,
                          profiles.keyed(active, b"misuse"), on_example, None, misuse=True)
        deadline = None if search.duration_s is None else time.monotonic() + search.duration_s
        report.misuse_findings = misuse.find(
            [], strategies.misuse_cases(contract=contract, dtypes_supported=caps.gather_dtypes()),
            misuse.judge_misuse, budget, deadline)
        report.misuse_examples = misuse.progress.examples
        report.unattributed += misuse.unattributed
    if session.semantics is not None:
        report.graded_cases = session.semantics.pop("", 0)
        # a contract one case refuted is not counted on (_unrefuted): only those every case matched are kept
        report.de_facto = {c: n for c, n in session.semantics.items() if n == report.graded_cases}
    for case, failed in session.progress.seen:
        report.coverage.record(case, failed)
    report.elapsed_s = time.monotonic() - started
    return report


__all__ = ["PropertyViolation", "SearchSettings", "VIOLATION_TYPES", "run_check"]
