"""The pool survives every way a variant can break, reports it, and heals (issue: pool).

Each planted variant in ``tests/planted_faults.py`` breaks in exactly one way on rank 1.  The
fault must be classified with the right kind, name the rank(s), arrive within the case
timeout plus a few seconds, and the very next correct case must pass on the healed pool.
"""

from __future__ import annotations

import time

import pytest
import torch.distributed as dist

from harness.case import Case, RankSpec
from harness.checks import check_outcome
from harness.pool import Pool

TIMEOUT_S = 2.0
SLACK_S = 4.0
RAGGED = Case(ranks=(RankSpec((3, 2)), RankSpec((1, 2)), RankSpec((0, 2))), dim=0)
CORRECT = "tests.planted_faults:correct"


@pytest.fixture(scope="module")
def fault_pool():
    """A pool whose forkserver is warm, so a fault's time is the fault's alone, not the start's."""
    with Pool(timeout=TIMEOUT_S) as pool:
        assert pool.run(RAGGED, CORRECT, timeout=120.0).fault is None
        yield pool


def run_timed(pool: Pool, target: str, case: Case = RAGGED):
    started = time.monotonic()
    outcome = pool.run(case, target)
    return outcome, time.monotonic() - started


@pytest.mark.parametrize(
    "target, kind, culprit_text",
    [
        ("hang_rank1", "hang", "rank 1 blocked"),
        # gloo aborts a rank on the size mismatch; the ledgers show its cause first: a desync
        ("abort_mismatch", "desync", "collective #1: rank 0 entered all_gather(torch.float32, shape=(3, 2)), "
                                     "rank 1 all_gather(torch.float32, shape=(1, 2))"),
        ("segfault_rank1", "crash", "rank 1 died: killed by signal SIGSEGV"),
        ("exit_rank1", "crash", "rank 1 died: exited with status 3"),
        ("killed_by_sigkill_rank1", "crash", "rank 1 died: killed by signal SIGKILL"),
        ("raise_rank1", "exception", "ValueError: planted failure on rank 1"),
        ("desync_extra_collective", "desync", "rank 0 blocked; last collective entered: #1 all_reduce"),
    ],
)
def test_fault_is_reported_and_pool_heals(fault_pool: Pool, target: str, kind: str, culprit_text: str) -> None:
    outcome, elapsed = run_timed(fault_pool, f"tests.planted_faults:{target}")
    assert outcome.fault == kind, outcome.describe_fault() if outcome.fault else outcome
    assert elapsed <= TIMEOUT_S + SLACK_S
    report = outcome.describe_fault()
    assert culprit_text in report, report
    [violation] = check_outcome(outcome)
    assert (violation.property, violation.kind) == ("no-hang-no-crash", kind)

    healed, _ = run_timed(fault_pool, CORRECT)
    assert healed.fault is None and not healed.errors
    assert check_outcome(healed) == []


def test_hang_report_has_every_blocked_ranks_stack_and_collective(fault_pool: Pool) -> None:
    outcome, _ = run_timed(fault_pool, "tests.planted_faults:hang_rank1")
    report = outcome.describe_fault()
    shape_exchange = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"  # < 2.13
    assert f"rank 0 blocked; last collective entered: #1 {shape_exchange}(torch.int64, shape=(2,))" in report
    assert "in hang_rank1" in report  # rank 1's Python stack, from faulthandler
    assert "in correct" in report  # the other ranks' stacks


def test_crash_report_carries_the_ranks_own_output(fault_pool: Pool) -> None:
    outcome, _ = run_timed(fault_pool, "tests.planted_faults:segfault_rank1")
    assert "Fatal Python error: Segmentation fault" in outcome.describe_fault(), outcome.describe_fault()


def test_a_fault_replaces_the_ranks(fault_pool: Pool) -> None:
    before = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs]
    run_timed(fault_pool, "tests.planted_faults:raise_rank1")
    after = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs]
    assert not set(before) & set(after)


def test_warm_ranks_are_reused_between_correct_cases(fault_pool: Pool) -> None:
    run_timed(fault_pool, CORRECT)
    before = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs]
    for _ in range(3):
        outcome, _ = run_timed(fault_pool, CORRECT)
        assert check_outcome(outcome) == []
    assert [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs] == before


@pytest.mark.parametrize("world_size", [1, 2, 5, 8])
def test_world_sizes_one_to_eight(fault_pool: Pool, world_size: int) -> None:
    case = Case(ranks=tuple(RankSpec((r % 3, 2)) for r in range(world_size)), dim=0)
    outcome, _ = run_timed(fault_pool, CORRECT, case)
    assert check_outcome(outcome) == []


def test_target_that_cannot_load_is_an_error_not_a_hang(fault_pool: Pool) -> None:
    outcome, elapsed = run_timed(fault_pool, "tests.planted_faults:no_such_gather")
    assert outcome.fault is None and elapsed < TIMEOUT_S
    assert all("has no attribute 'no_such_gather'" in r.error for r in outcome.results)
