"""The fuzz engine's batches: cases judged on the ranks, and a failure handed to the usual search (issue 39).

A batch of one layout's cases runs back to back on warm ranks, each judged there; only how many
passed comes back (:meth:`harness.pool.pool.Pool.run_batch`).  Whatever a batch meets is run
again the usual way (:meth:`harness.search.session._Session.sweep`), so a finding from a batch is the
finding the usual search reports.
"""

from __future__ import annotations

import itertools
import time

import pytest
from harness.strategies import random_strata

from harness.core.case import Case, RankSpec
from harness.core.contract import Contract
from harness.core.conventions import Call
from harness.core.procedure import BatchRequest, RunRequest
from harness.pool.pool import LocalPool
from harness.search.engine import run_check
from harness.search.session import BATCHES

CORRECT = "harness.ragged:all_gather_ragged"
CALL = Call(name="all_gather_ragged", positional=(("dim", "dim"),))
TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def pool():
    with LocalPool(timeout=TIMEOUT_S) as pool:
        yield pool


def drawn(world: int, count: int, *, seed: int = 1, dtypes: tuple[str, ...] = ("float32", "int64", "float64")):
    """``count`` cases of one layout on ``world`` ranks, as the batches draw them."""
    contract = Contract(ragged=True, dims="any", grad="none", world_sizes=(world, world), dtypes=dtypes)
    source = random_strata(contract=contract, dtypes=dtypes, backend="gloo", device="cpu", seed=seed)
    first = next(source).case
    same = (layer.case for layer in source if layer.case.layout() == first.layout())
    return [first, *itertools.islice(same, count - 1)]


def batch(cases, target: str = CORRECT, repeat: bool = False) -> BatchRequest:
    return BatchRequest(tuple(RunRequest(case=case, target=target, call=CALL, repeat=repeat) for case in cases))


def test_a_batch_of_a_correct_gather_passes_and_becomes_its_ranks_history(pool: LocalPool) -> None:
    cases = drawn(2, 24)
    assert pool.run_batch(batch(cases, repeat=True)).passed == len(cases)
    rank_set = pool.existing("gloo", "cpu", 2)
    assert rank_set is not None and [case for case, _ in rank_set.history[-len(cases):]] == cases
    again = pool.run_batch(batch(cases[:3]))
    assert again.passed == 3 and [case for case, _ in again.history[-len(cases):]] == cases  # the same warm ranks


def test_a_batch_stops_at_the_first_case_that_fails_on_a_rank_and_its_ranks_are_replaced(pool: LocalPool) -> None:
    """The planted bug narrows float64 to float32: only the float64 case fails, and the ranks, judging
    each case themselves, stop there."""
    cases = drawn(1, 12, dtypes=("float32",))
    cases[7] = Case(ranks=(RankSpec((5, 2), values="random", seed=3),), dim=0, dtype="float64")
    before = pool.existing("gloo", "cpu", 1)
    assert pool.run_batch(batch(cases, target="tests.planted.bugs:float64_to_float32")).passed == 7
    assert before is None or before.broken
    assert pool.run_batch(batch(cases[:7], target="tests.planted.bugs:float64_to_float32")).passed == 7


def test_a_fault_in_a_batch_says_on_which_case_and_replaces_the_ranks(pool: LocalPool) -> None:
    """The ranks publish which case they are on, so a hang names its case (the first here: the
    planted target hangs on every call) though the hung rank sends nothing back.  The case has
    its timeout from when it began, once: not a second one because the ranks published it after
    the batch was sent (a hung batch waited two timeouts so)."""
    assert pool.run_batch(batch(drawn(2, 2))).passed == 2  # warm ranks: the timing is the batch's own
    before = pool.existing("gloo", "cpu", 2)
    started = time.monotonic()
    run = pool.run_batch(batch(drawn(2, 6), target="tests.planted.faults:hang_rank1"), timeout=2.0)
    assert (run.passed, run.fault) == (0, "hang")
    assert time.monotonic() - started < 2 * 2.0
    assert before is None or before.broken
    assert pool.run_batch(batch(drawn(2, 4))).passed == 4  # fresh ranks, warm again


def test_a_rank_that_stopped_at_a_failing_case_is_not_waited_for_by_its_peers(pool: LocalPool) -> None:
    """Rank 1 raises inside the gather its peers wait in (the backend refuses its sizes), so its
    batch stops at that case while theirs cannot go on: its reply ends the batch, as a raise ends
    a case run alone, instead of the peers' timeout (the catalogue's ragged all-to-alls on gloo
    waited 5 s a batch so)."""
    assert pool.run_batch(batch(drawn(2, 2))).passed == 2  # warm ranks: the timing is the batch's own
    started = time.monotonic()
    run = pool.run_batch(batch(drawn(2, 6), target="tests.planted.faults:raises_inside_rank1"), timeout=TIMEOUT_S)
    assert run.passed == 0
    assert time.monotonic() - started < TIMEOUT_S


def test_each_case_of_a_batch_has_the_whole_timeout(pool: LocalPool) -> None:
    """Twenty cases of 0.1 s asleep each, against a 0.3 s timeout: longer in all than the patience
    given a busy case (``PATIENCE`` timeouts), but the ranks say they moved on to the next case,
    so the batch is neither a hang nor too slow (CI saw a W=10 torchrun job dropped so)."""
    run = pool.run_batch(batch(drawn(2, 20), target="tests.planted.faults:naps_on_rank1"), timeout=0.3)
    assert (run.passed, run.fault) == (20, None)


def test_a_case_failing_its_checks_on_every_rank_keeps_the_ranks_and_reloads_the_target(pool: LocalPool) -> None:
    """As after a failing case run alone (``Pool.forget_state``): the ranks stay, the target's
    module is executed afresh before the next case."""
    cases = drawn(2, 5)
    assert pool.run_batch(batch(cases)).passed == 5
    kept = pool.existing("gloo", "cpu", 2)
    run = pool.run_batch(batch(cases, target="tests.planted.bugs:reversed_ranks"))
    assert run.passed is not None and run.passed < 5 and run.fault is None
    assert pool.existing("gloo", "cpu", 2) is kept and kept is not None and kept.reload_next


@pytest.mark.slow
def test_a_failure_only_a_long_run_meets_is_found_by_the_batches_as_the_usual_search_reports_it() -> None:
    """Right for the first 300 calls in a rank process: the strata and Hypothesis make fewer, a
    batch meets it; run again the usual way after the history of its ranks, it is a
    history-dependent finding, shrunk and confirmed as the search's own are."""
    contract = Contract(ragged=True, dims="any", grad="none", world_sizes=(1, 1))
    report = run_check("tests.planted.bugs:fails_after_many_calls", contract, duration_s=15.0, seed=5, batches=True)
    [finding] = report.findings
    assert (finding.property, finding.status) == ("values", "history-dependent")
    assert finding.found_by.startswith(BATCHES)  # repro scripts are written by the command (api.execute)
    assert finding.seen_after  # the cases its ranks had run: what the confirmation replayed it after


@pytest.mark.slow
def test_batches_of_a_correct_gather_pass_far_beyond_the_search_s_examples() -> None:
    contract = Contract(ragged=True, dims="any", grad="sum", world_sizes=(1, 2))
    report = run_check(CORRECT, contract, max_examples=1000, seed=2, batches=True)
    assert report.verdict == "pass" and not report.unattributed
    assert report.examples == 1000, report.examples


def test_two_batches_of_one_rank_run_at_once_on_two_sets_and_the_pool_stops_both() -> None:
    """Where the machine has a core for each (two here), two batches of W=1 run at once: one on the
    key's set, one on its twin; closing the pool stops both."""
    with LocalPool(timeout=TIMEOUT_S) as own:
        lanes = own.lanes(1)
        batches = [batch(drawn(1, 8, seed=seed)) for seed in range(max(lanes, 2))][:lanes]
        assert [run.passed for run in own.run_batches(batches)] == [8] * lanes
        sets = [own.existing("gloo", "cpu", 1), *own.twins.values()]
        assert len({id(s) for s in sets}) == lanes
        procs = [proc for s in sets if s is not None for proc in s.procs]
    assert all(proc.exitcode is not None for proc in procs)


def test_a_set_that_ran_many_batches_is_replaced_so_a_failure_s_history_stays_short(
        pool: LocalPool, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.pool import rankset

    monkeypatch.setattr(rankset, "MAX_BATCH_HISTORY", 10)
    cases = drawn(1, 8, seed=4)
    pool.run_batch(batch(cases))  # whatever the set had run before, it is at 8 or more now
    pool.run_batch(batch(cases))
    last = pool.run_batch(batch(cases))
    assert last.passed == 8 and len(last.history) < 10
