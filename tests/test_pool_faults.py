"""The pool survives every way a variant can break, reports it, and heals (issue: pool).

Each planted variant in ``tests/planted/faults.py`` breaks in exactly one way on rank 1.  The
fault must be classified with the right kind, name the rank(s), arrive within the case
timeout plus a few seconds, and the very next correct case must pass on the healed pool.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import subprocess
import sys
import time
import weakref

import pytest
import torch.distributed as dist

from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome
from harness.core.contract import Contract
from harness.core.conventions import Call
from harness.core.procedure import RankResult
from harness.pool.faults import in_step
from harness.pool.pool import LocalPool
from harness.pool.watch import usage
from harness.ranks.protocol import Entered, ledger_text, read_ledger, read_slot
from harness.report import hints
from harness.report.stacks import user_frames
from harness.search.finding import finding_of
from harness.settings.options import PATIENCE

TIMEOUT_S = 2.0
SLACK_S = 4.0
RAGGED = Case(ranks=(RankSpec((3, 2)), RankSpec((1, 2)), RankSpec((0, 2))), dim=0)
CORRECT = "tests.planted.faults:correct"


@pytest.fixture(scope="module")
def fault_pool():
    """A pool whose forkserver is warm, so a fault's time is the fault's alone, not the start's."""
    with LocalPool(timeout=TIMEOUT_S) as pool:
        assert pool.run(RAGGED, CORRECT, timeout=120.0).fault is None
        yield pool


def run_timed(pool: LocalPool, target: str, case: Case = RAGGED):
    started = time.monotonic()
    outcome = pool.run(case, target)
    return outcome, time.monotonic() - started


#: How the ledgers name the mismatch of ``abort_mismatch``: at rank 0's first collective, against
#: whichever mismatched rank they show first.
MISMATCH_AT = "at collective #1, rank 0 entered all_gather(torch.float32, shape=(3, 2)) but "


@pytest.mark.parametrize(
    "target, kind, culprit_texts",
    [
        ("hang_rank1", "hang", ("rank 1 blocked",)),
        # gloo aborts a rank on the size mismatch; the ledgers show its cause first: a desync, named at
        # rank 1, or at rank 2, whose empty all_gathers gloo completes alone
        # (docs/findings/gloo_empty_all_gather_alone.py)
        ("abort_mismatch", "desync", (MISMATCH_AT + "rank 1 entered all_gather(torch.float32, shape=(1, 2))",
                                      MISMATCH_AT + "rank 2 entered all_gather(torch.float32, shape=(0, 2))")),
        ("segfault_rank1", "crash", ("rank 1 died: killed by signal SIGSEGV",)),
        ("exit_rank1", "crash", ("rank 1 died: exited with status 3",)),
        ("killed_by_sigkill_rank1", "crash", ("rank 1 died: killed by signal SIGKILL",)),
        ("raise_rank1", "exception", ("ValueError: planted failure on rank 1",)),
        ("desync_extra_collective", "desync", ("rank 0 blocked in collective #1 all_reduce",)),
    ],
)
def test_fault_is_reported_and_pool_heals(fault_pool: LocalPool, target: str, kind: str,
                                          culprit_texts: tuple[str, ...]) -> None:
    """``culprit_texts``: the report names the culprit in one of these ways."""
    outcome, elapsed = run_timed(fault_pool, f"tests.planted.faults:{target}")
    assert outcome.fault == kind, outcome.describe_fault() if outcome.fault else outcome
    assert elapsed <= TIMEOUT_S + SLACK_S
    report = outcome.describe_fault()
    assert any(text in report for text in culprit_texts), report
    [violation] = check_outcome(outcome)
    # a rank that raised is reported under its phase's property (here the forward: values), the
    # same whether its peers blocked or returned; the wait is in the message
    prop = "values" if kind == "exception" else "no-hang-no-crash"
    assert (violation.property, violation.kind) == (prop, kind)
    assert kind != "exception" or "meanwhile, waiting for the rank(s) that raised:" in violation.message

    healed, _ = run_timed(fault_pool, CORRECT)
    assert healed.fault is None and not healed.errors
    assert check_outcome(healed) == []


def test_hang_report_has_every_blocked_ranks_stack_and_collective(fault_pool: LocalPool) -> None:
    outcome, _ = run_timed(fault_pool, "tests.planted.faults:hang_rank1")
    report = outcome.describe_fault()
    shape_exchange = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"  # < 2.13
    assert f"rank 0 blocked in collective #1 {shape_exchange}(torch.int64, shape=(2,))" in report
    assert "in hang_rank1" in report  # rank 1's Python stack, from faulthandler
    assert "in correct" in report  # the other ranks' stacks
    # As a person reads it: the target's frames, and the collective the others wait in.
    shown = user_frames(report)
    assert "in hang_rank1" in shown and "in correct" in shown and "distributed_c10d.py" in shown
    assert "harness/ranks/rank.py" not in shown and "multiprocessing" not in shown and "procedure.py" not in shown
    assert shown.count("frames of the harness, Python and torch hidden: --full-stacks shows them") == 3


def test_ranks_asleep_after_a_peer_raised_are_not_waited_for_to_the_end_of_the_grace(fault_pool: LocalPool) -> None:
    """Rank 1 raised inside the collective the others sleep in (so the ledgers cannot prove them
    stuck): once they have been seen idle for a short while (``SETTLE_S``) the case ends, not at
    the end of the whole grace."""
    outcome, _ = run_timed(fault_pool, "tests.planted.faults:raises_inside_rank1")
    assert outcome.fault == "exception"
    assert "was idle (asleep in a wait for 0.1 s) once a peer had raised or died" in outcome.waited, outcome.waited


@pytest.mark.slow
def test_a_rank_busy_after_a_peer_raised_is_waited_for_until_the_patience_is_spent_not_for_ever(
        fault_pool: LocalPool) -> None:
    """The settle's looks after a peer raised are its own: they never push the deadline's window on
    (a wait that once never ended on ranks that stay busy, or that cannot be looked at: remote ones)."""
    outcome, elapsed = run_timed(fault_pool, "tests.planted.faults:spins_while_rank1_raises")
    assert outcome.fault == "exception" and "still busy after" in outcome.waited, outcome.waited
    assert elapsed <= TIMEOUT_S * PATIENCE + SLACK_S


@pytest.mark.slow
def test_a_slowed_rank_is_waited_for_and_a_stuck_one_is_a_hang(fault_pool: LocalPool) -> None:
    """What a starved machine does to a case (a rank busy past the timeout) is not a hang; a rank
    asleep in a wait is one at the timeout; a rank spinning forever is one once the patience is spent."""
    slow, elapsed = run_timed(fault_pool, "tests.planted.faults:slow_rank1")
    assert slow.fault is None and check_outcome(slow) == [], slow.describe_fault() if slow.fault else slow
    assert elapsed > TIMEOUT_S  # it did run past the timeout: a hang before the watch
    asleep, elapsed = run_timed(fault_pool, "tests.planted.faults:hang_rank1")
    assert asleep.fault == "hang" and elapsed <= TIMEOUT_S + SLACK_S
    assert "every rank that had not returned was idle (asleep in a wait for the last" in asleep.describe_fault()
    spinning, elapsed = run_timed(fault_pool, "tests.planted.faults:spins_rank1")
    assert spinning.fault == "hang" and TIMEOUT_S * PATIENCE <= elapsed <= TIMEOUT_S * PATIENCE + SLACK_S
    assert f"still busy after {TIMEOUT_S * PATIENCE:.0f}" in spinning.describe_fault(), spinning.describe_fault()
    assert "in spins_rank1" in spinning.describe_fault()


#: A correct gather over a group, called as ``target(x, dim, group=group)``.
WITH_GROUP = "examples.with_group:gather"
GROUP_CALL = Call(name="gather", positional=(("dim", "dim"),), keywords=(("group", "group"),), group_optional=True)


def test_making_a_case_s_groups_is_the_harness_s_wait_not_the_target_s(fault_pool: LocalPool) -> None:
    """A group slow to come up (rank 1 asleep for longer than the timeout before it makes one)
    is waited for apart from the case: no hang is charged to the target."""
    case = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((3,))), groups=((0, 1),))
    fault_pool.call(3, "tests.planted.faults:groups_made_slowly_on_rank1", TIMEOUT_S + 1.5)
    outcome = fault_pool.run(case, WITH_GROUP, call=GROUP_CALL)
    assert outcome.fault is None and check_outcome(outcome) == [], outcome.describe_fault() if outcome.fault else outcome


def test_ranks_that_cannot_make_the_groups_are_replaced_not_blamed(fault_pool: LocalPool) -> None:
    case = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((3,))), groups=((0, 2), (1,)))
    fault_pool.call(3, "tests.planted.faults:groups_fail_on_rank1")
    failing = fault_pool.existing("gloo", "cpu", 3)
    outcome = fault_pool.run(case, WITH_GROUP, call=GROUP_CALL)
    assert outcome.fault is None and check_outcome(outcome) == [], outcome.describe_fault() if outcome.fault else outcome
    assert failing is not None and failing.broken and fault_pool.existing("gloo", "cpu", 3) is not failing


def test_a_target_that_makes_a_group_on_its_members_only_leaves_no_rank_behind(fault_pool: LocalPool) -> None:
    """Rank 2, idle, makes one group fewer than ranks 0 and 1: the set is dropped, or the next
    layout's ``new_group`` would name a group two ways and never return."""
    first = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((3,))), groups=((0, 1),))
    outcome = fault_pool.run(first, "tests.planted.faults:makes_a_group_per_call", call=GROUP_CALL)
    assert outcome.fault is None and check_outcome(outcome) == [], outcome.describe_fault() if outcome.fault else outcome
    assert fault_pool.existing("gloo", "cpu", 3) is None, "ranks that disagree on the groups made were kept"
    second = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((3,))), groups=((1, 2),))
    outcome = fault_pool.run(second, WITH_GROUP, call=GROUP_CALL)
    assert outcome.fault is None and check_outcome(outcome) == [], outcome.describe_fault() if outcome.fault else outcome


def test_ranks_that_failed_with_unrecorded_collectives_are_replaced_not_kept(fault_pool: LocalPool) -> None:
    """DTensor on shards out of its contract moves different sizes on each rank through functional
    collectives the ledgers cannot compare; kept ranks (module re-executed, as before) then hung
    on the next, all-empty case, every time (the report's 'not counted' hang on torch 2.15)."""
    target = "harness.variants.torch_paths:dtensor_redistribute_uneven"
    call = Call(name="dtensor_redistribute_uneven", positional=(("dim", "dim"),), keywords=(("group", "group"),),
                group_optional=True)
    for ranks in [(RankSpec((36,)), RankSpec((0,), values="padding")), (RankSpec((36,)), RankSpec((0,)))]:
        failing = fault_pool.run(Case(ranks=ranks, grad="local"), target, call=call)
        assert failing.fault is None and failing.unrecorded and check_outcome(failing), failing
        fault_pool.after_failure(failing)
        assert fault_pool.existing("gloo", "cpu", 2) is None, "ranks that moved unrecorded payloads were kept"
    empty = fault_pool.run(Case(ranks=(RankSpec((0,)), RankSpec((0,))), grad="local"), target, call=call)
    assert empty.fault is None and check_outcome(empty) == [], empty.describe_fault() if empty.fault else empty


def test_a_failing_case_of_recorded_collectives_keeps_its_ranks(fault_pool: LocalPool) -> None:
    """Every collective of ``adds_one`` is recorded and compared: its ranks stay, the target's
    module is executed afresh."""
    failing = fault_pool.run(RAGGED, "tests.planted.faults:adds_one")
    assert check_outcome(failing) and not failing.unrecorded, failing
    kept = fault_pool.existing("gloo", "cpu", 3)
    fault_pool.after_failure(failing)
    assert kept is not None and fault_pool.existing("gloo", "cpu", 3) is kept and kept.reload_next


@pytest.mark.slow
def test_usage_tells_a_working_process_from_a_sleeping_one() -> None:
    working = usage(os.getpid())  # this thread, reading /proc, is running
    assert working is not None and working[1] and working[0] > 0
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as sleeper:
        time.sleep(1.0)  # past its start-up
        asleep = usage(sleeper.pid)
        sleeper.kill()
    assert asleep is not None and not asleep[1]
    assert usage(2**22 + 1) is None  # no such process


def test_a_fault_on_ragged_input_that_equal_lengths_avoid_suggests_no_ragged(fault_pool: LocalPool) -> None:
    """An unpadded all_gather desyncs on ragged input; the same case with equal lengths passes."""
    outcome, _ = run_timed(fault_pool, "tests.planted.faults:abort_mismatch")
    finding = finding_of(RAGGED, check_outcome(outcome))
    hint = hints.ragged_hint(fault_pool, "tests.planted.faults:abort_mismatch", Contract(), finding, TIMEOUT_S)
    assert hint == ("the same case passes when every rank holds 3 along dim 0; --no-ragged (ragged=False from Python) "
                    "would check only equal sizes and no longer this failure: it is the right contract only if the "
                    "code documents that the gather needs equal sizes on every rank")
    assert hints.ragged_hint(fault_pool, "tests.planted.faults:abort_mismatch", Contract(ragged=False), finding,
                             TIMEOUT_S) == ""
    # a target told the sizes (an MoE dispatch's split sizes) claims ragged input: --no-ragged would hide its bug
    told = dataclasses.replace(finding, call=Call(name="dispatch", keywords=(("input_split_sizes", "input_split_sizes"),)))
    assert hints.ragged_hint(fault_pool, "tests.planted.faults:abort_mismatch", Contract(), told, TIMEOUT_S) == ""
    # a fault that equal lengths do not avoid gets no hint
    outcome, _ = run_timed(fault_pool, "tests.planted.faults:exit_rank1")
    crash = finding_of(RAGGED, check_outcome(outcome))
    assert hints.ragged_hint(fault_pool, "tests.planted.faults:exit_rank1", Contract(), crash, TIMEOUT_S) == ""


def test_crash_report_carries_the_ranks_own_output(fault_pool: LocalPool) -> None:
    outcome, _ = run_timed(fault_pool, "tests.planted.faults:segfault_rank1")
    assert "Fatal Python error: Segmentation fault" in outcome.describe_fault(), outcome.describe_fault()


def test_a_fault_replaces_the_ranks(fault_pool: LocalPool) -> None:
    before = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs]
    run_timed(fault_pool, "tests.planted.faults:raise_rank1")
    after = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs]
    assert not set(before) & set(after)


def test_ranks_dropped_after_a_fault_close_their_pipes_at_once(fault_pool: LocalPool) -> None:
    """A dropped set is freed as soon as the pool lets go of it, not when the garbage collector next
    runs: a night's fuzzing replaces sets after every fault, and each one waiting for a collection
    held its pipes open (the soak saw the driver's descriptors climb by a hundred)."""
    dropped = weakref.ref(fault_pool.rank_set("gloo", "cpu", 3))
    gc.disable()
    try:
        run_timed(fault_pool, "tests.planted.faults:segfault_rank1")
        assert fault_pool.run(RAGGED, CORRECT).fault is None  # on a new set: the old one is gone from the pool
        assert dropped() is None
    finally:
        gc.enable()


def test_ranks_that_went_out_of_step_are_replaced(fault_pool: LocalPool) -> None:
    """Rank 1 raised and rank 0 gathered empty tensors alone: every rank returned, but the group's
    collective tags now differ, and a next case on those ranks would hang on every rank (a hang
    that is the harness's).  The set is replaced instead, and the next case passes."""
    empty = Case(ranks=(RankSpec((0,)), RankSpec((0,))))
    before = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 2).procs]
    outcome = fault_pool.run(empty, "tests.planted.faults:goes_on_alone", repeat=False)
    assert outcome.fault is None and [res.rank for res in outcome.errors] == [1], outcome
    assert not in_step(outcome.results)
    healed, _ = run_timed(fault_pool, CORRECT, Case(ranks=(RankSpec((3,)), RankSpec((2,)))))
    assert healed.fault is None and check_outcome(healed) == []
    assert not set(before) & {p.pid for p in fault_pool.rank_set("gloo", "cpu", 2).procs}


def test_in_step_needs_every_member_of_every_group_at_one_count() -> None:
    def ranks(*sequences: dict | None) -> list:
        # a helper that formed the group itself reports rank 0 on every rank: results count by place
        return [RankResult(rank=0, sequences=s) for s in sequences]

    world, pair = ("0", ((0, 1, 2), 4)), ("1", ((1, 2), 2))
    assert in_step(ranks(dict([world]), dict([world, pair]), dict([world, pair])))
    assert not in_step(ranks(dict([world]), dict([world, pair]), {"0": ((0, 1, 2), 4), "1": ((1, 2), 3)}))
    assert not in_step(ranks(dict([world]), dict([world, pair]), dict([world])))  # a member lacks the group
    assert not in_step(ranks(dict([world]), dict([world]), None))  # this torch did not say
    assert not in_step([*ranks(dict([world]), dict([world])), None])  # a rank did not return


def test_a_ledger_copied_while_half_rewritten_is_never_misread() -> None:
    """The controller copies a rank's shared ledger while the rank may be rewriting it: the new
    text's start glued to the old one's end.  Every such splice must read as unknown (``None``)
    or as a true ledger, never as a collective the rank did not enter at that place (a desync
    that was not there)."""
    def key(seq: int) -> str:
        return f"all_gather(torch.{('float16', 'uint8', 'bfloat16')[seq % 3]}, shape=({seq % 5},))"

    def text(last: int) -> bytes:
        entries = [Entered(seq, key(seq), "", key(seq)) for seq in range(1, last + 1)]
        return ledger_text(entries, False, {"": last})

    old, new = text(79), text(80)  # past the slot's size: every entry shifts when one is added
    spliced = [read_ledger(new[:cut] + old[cut:len(new)]) for cut in range(len(new))]
    assert all(ledger is None or all(entry.key == key(entry.seq) for entry in ledger.entries) for ledger in spliced)
    assert any(ledger is None for ledger in spliced)
    torn = type("Slot", (), {"value": new[:100] + old[100:len(new)]})()
    assert read_slot(torn).entries == []  # never a whole copy: nothing known, nothing decided


def test_warm_ranks_are_reused_between_correct_cases(fault_pool: LocalPool) -> None:
    run_timed(fault_pool, CORRECT)
    before = [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs]
    for _ in range(3):
        outcome, _ = run_timed(fault_pool, CORRECT)
        assert check_outcome(outcome) == []
    assert [p.pid for p in fault_pool.rank_set("gloo", "cpu", 3).procs] == before


@pytest.mark.parametrize("world_size", [1, 2, 5, 8])
def test_world_sizes_one_to_eight(fault_pool: LocalPool, world_size: int) -> None:
    case = Case(ranks=tuple(RankSpec((r % 3, 2)) for r in range(world_size)), dim=0)
    outcome, _ = run_timed(fault_pool, CORRECT, case)
    assert check_outcome(outcome) == []


def test_target_that_cannot_load_is_an_error_not_a_hang(fault_pool: LocalPool) -> None:
    outcome, elapsed = run_timed(fault_pool, "tests.planted.faults:no_such_gather")
    assert outcome.fault is None and elapsed < TIMEOUT_S
    assert all("has no attribute 'no_such_gather'" in r.error for r in outcome.results)


@pytest.mark.slow
def test_a_slowed_case_under_a_long_check_timeout_is_never_ended_by_the_process_groups_timeout(monkeypatch) -> None:
    """A check's ``--timeout`` travels with its calls to a pool whose sets were started for a
    shorter one: the sets are started again for the longer one before it runs, so their process
    groups (gloo's own timeout) outlast the harness's wait for a slowed case.  Scaled down here:
    without the groups' floor and the compile patience, a group outlasts 6 case timeouts, so the
    set started for a 1 s case gets 6 s, and the slowed rank (12 s, within the 3 s case's
    patience) would make its peers' gather raise inside gloo if that set were kept."""
    from harness.pool import machine
    from tests.planted.faults import SLOWED_S

    monkeypatch.setattr(machine, "GROUP_TIMEOUT_FLOOR_S", 0.0)
    monkeypatch.setattr(machine, "COMPILE_PATIENCE", 1.0)
    with LocalPool(timeout=1.0) as pool:
        assert pool.run(RAGGED, CORRECT, timeout=1.0).fault is None  # a set for the short timeout
        first = pool.existing(RAGGED.backend, RAGGED.device, RAGGED.world_size)
        assert first is not None and first.group_timeout_s < SLOWED_S
        outcome = pool.run(RAGGED, "tests.planted.faults:rank0_slow_then_gathers", timeout=3.0)
        assert outcome.fault is None, outcome.describe_fault()
        assert check_outcome(outcome) == []  # gloo's "Timed out waiting 6000ms" on ranks 1 and 2, were the set kept
        used = pool.existing(RAGGED.backend, RAGGED.device, RAGGED.world_size)
        assert used is not first and used.group_timeout_s >= machine.group_timeout_s(3.0) > SLOWED_S
