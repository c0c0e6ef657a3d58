"""Findings a user can trust: confirmed, diagnosed for what they are, found early, reported the same way twice.

- A gather that keeps state between calls is reported as history-dependent, with the
  shortest history that makes it fail, in the message, the JSON and the repro.
- A gather built with arithmetic (zero-fill + ``all_reduce``) is right under ``values`` and
  wrong under ``bits``, named as such (never ``stable``), and passes with ``bits`` waived.
- A failure that needs ranks whose layouts differ says so (lightning-bolts' ``SyncFunction``).
- A bug confined to one dtype, one value class or one shape class is found by the strata,
  for every seed, within half the default budget.
- The report prints the same table twice.
- Shrinking that was cut short says so; no private Hypothesis API is used.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import hypothesis
import pytest
from hypothesis import settings

from benchmarks import concurrency, confined, shrinking
from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome
from harness.core.compare import Violation
from harness.core.contract import Contract
from harness.core.procedure import RankResult, record_error
from harness.frontends import catalogue_report
from harness.frontends import commands as cli
from harness.frontends.api import profile_settings, warn_unattributed
from harness.pool import capabilities
from harness.pool.faults import Outcome
from harness.pool.pool import LocalPool
from harness.report import hints, repro
from harness.report.text import finding_message
from harness.search import confirm, session
from harness.search.batches import BatchEngine
from harness.search.engine import run_check
from harness.search.finding import Finding, UnreproducedFaultWarning
from harness.search.results import CheckReport
from harness.search.shrinking import MAX_SHRINK_STEPS, ShrinkClock
from harness.variants import by_name
from tests.budgets import SCRIPT_TIMEOUT_S

ROOT = Path(__file__).resolve().parent.parent
BUGS = "tests.planted.bugs"
CI = profile_settings("ci")


@pytest.mark.slow
def test_a_module_cache_is_reported_as_history_dependent(pool, tmp_path: Path) -> None:
    report = run_check(f"{BUGS}:caches_sizes", Contract(), max_examples=100, timeout_s=5.0, pool=pool, seed=11,
                       base_settings=CI)
    [finding] = report.findings
    assert finding.status == "history-dependent" and finding.replays[0] == 0, finding_message(finding)
    assert 1 <= len(finding.history) <= 3
    text = finding_message(finding)
    assert "history-dependent: passes alone on fresh ranks" in text and finding.history[0][0].describe() in text
    document = json.loads(json.dumps(finding.to_json()))
    assert document["status"] == "history-dependent" and len(document["history"]) == len(finding.history)
    path = repro.write(finding, f"{BUGS}:caches_sizes", tmp_path)
    done = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
    assert done.returncode == 1 and "the failure reproduces" in done.stdout, done.stdout + done.stderr
    assert "earlier case(s) ran on the same ranks" in path.read_text()


@pytest.mark.slow
def test_a_zero_fill_all_reduce_gather_breaks_bits_only(pool) -> None:
    report = run_check(f"{BUGS}:zero_fill_all_reduce", Contract(), max_examples=100, timeout_s=5.0, pool=pool, seed=2,
                       base_settings=CI)
    assert [finding.property for finding in report.findings] == ["bits"], "\n\n".join(finding_message(f) for f in report.findings)
    [finding] = report.findings
    assert "became" in finding.message and ("-0.0 became +0.0" in finding.message or "NaN" in finding.message)
    waived = run_check(f"{BUGS}:zero_fill_all_reduce", Contract(bits=False), max_examples=100, timeout_s=5.0, pool=pool,
                       seed=2, base_settings=CI)
    assert waived.verdict == "pass", "\n\n".join(finding_message(f) for f in waived.findings)


def test_a_signed_zero_is_named(pool) -> None:
    """The message says what became what, at which element, on which rank."""
    case = Case(ranks=(RankSpec((2,), values="special", seed=0), RankSpec((2,), values="special", seed=0)))
    violations = check_outcome(pool.run(case, f"{BUGS}:zero_fill_all_reduce", repeat=False))
    assert violations and all(v.property == "bits" for v in violations)
    assert any("-0.0 became +0.0 at output[" in v.message or "NaN 0x" in v.message for v in violations), violations


@pytest.mark.slow
def test_a_failure_needing_mixed_cotangent_layouts_says_so(pool) -> None:
    spec = by_name("bolts_sync_function")
    report = run_check(spec.target, spec.contract, max_examples=60, timeout_s=5.0, pool=pool, seed=1,
                       base_settings=CI, track_semantics=True)
    [finding] = report.findings
    assert finding.property == "gradients"
    assert finding.condition.startswith("fails only when ranks' cotangent layouts differ"), finding_message(finding)
    assert report.de_facto_semantics() == "sum"


def test_the_layout_condition_is_read_from_uniform_reruns() -> None:
    case = Case(ranks=(RankSpec((1, 2)), RankSpec((1, 2), cotangent_layout="transposed")), grad="sum")
    mixed_only = confirm.layout_condition(case, lambda c: len({s.cotangent_layout for s in c.ranks}) > 1)
    assert mixed_only == ("fails only when ranks' cotangent layouts differ "
                          "(every rank contiguous: passes; every rank transposed: passes)")
    always = confirm.layout_condition(case, lambda c: True)
    assert always == "fails with every rank's cotangent layout contiguous, transposed too"


def test_the_layout_condition_is_said_in_plain_words() -> None:
    case = Case(ranks=(RankSpec((1, 2)), RankSpec((1, 2), cotangent_layout="transposed")), grad="sum")
    mixed = Finding("gradients", "mismatch", case, "", [], condition=confirm.layout_condition(
        case, lambda c: len({s.cotangent_layout for s in c.ranks}) > 1))
    assert hints.layout_hint(mixed) == (
        "in plain words: the gradient arriving in the backward (grad_output) is laid out differently in memory on "
        "different ranks (rank 0: contiguous, rank 1: transposed); a collective given that tensor, or its .clone() "
        "(which keeps the layout), pairs up elements by their place in memory, not by index: call .contiguous() on "
        "it before the collective")
    always = dataclasses.replace(mixed, condition=confirm.layout_condition(case, lambda c: True))
    assert hints.layout_hint(always) == ""


def scripted_replay(kind: str, *, after_history: list[bool]) -> confirm.Replay:
    """A replay that never fails alone and, after a history, fails (with ``kind``) as scripted:
    ``after_history[i]`` for the i-th such replay, passing once the script runs out."""
    script = iter(after_history)

    def replay(case: Case, history) -> list:
        if not history or not next(script, False):
            return []
        if kind == "hang":
            return check_outcome(Outcome(case, [None, None], fault="hang"))
        return [Violation("values", kind, 0, "output[0] = 1.0, expected 0.0")]

    return replay


def test_a_hang_one_history_replay_brings_back_is_not_put_down_to_that_history() -> None:
    """A replay stalled once by the machine (a hang after the history, none in the next) is not
    evidence: the finding stays unreproduced, so it is not counted against the target.  A hang
    that comes back every time, and a wrong value (the target's own) even once, are."""
    case, earlier = Case(ranks=(RankSpec((3,)), RankSpec((3,)))), Case(ranks=(RankSpec((1,)), RankSpec((2,))))
    hang = Finding("no-hang-no-crash", "hang", case, "hang: no rank returned", [], seen_after=((earlier, True),))
    stalled_once = confirm.confirm(dataclasses.replace(hang), scripted_replay("hang", after_history=[True]))
    assert stalled_once.status == "not reproduced" and not stalled_once.attributed()
    every_time = confirm.confirm(dataclasses.replace(hang), scripted_replay("hang", after_history=[True] * 4))
    assert every_time.status == "history-dependent" and every_time.history == ((earlier, True),)
    wrong = Finding("values", "mismatch", case, "output[0] = 1.0", [], seen_after=((earlier, True),))
    wrong_once = confirm.confirm(wrong, scripted_replay("mismatch", after_history=[True]))
    assert wrong_once.status == "history-dependent" and wrong_once.attributed()


def test_a_hang_that_never_came_back_says_it_may_be_the_machine() -> None:
    case = Case(ranks=(RankSpec((3,)), RankSpec((3,))))
    hang = Finding("no-hang-no-crash", "hang", case, "hang: no rank returned", [], status="not reproduced", replays=(0, 3))
    wrong = Finding("values", "mismatch", case, "output[0]=1.0", [], status="not reproduced", replays=(0, 3))
    assert any("may be the machine's" in line and "--timeout" in line for line in hang.notes())
    assert not any("machine" in line for line in wrong.notes())
    hang.status = "confirmed"
    assert not any("machine" in line for line in hang.notes())


# -- a finding is the target's, shown by a replay, or it is not one ------------------------------------

FAULTS = f"{ROOT}/tests/planted/faults.py"


@pytest.mark.slow
def test_a_hang_no_replay_reproduces_passes_with_a_warning(tmp_path: Path) -> None:
    """A one-off stall of a rank (planted: the first 2-d case hangs, once per directory) is not the
    target's: exit 0, a warning line, a JSON warning; the search goes on to its full budget."""
    out = tmp_path / "check.json"
    done = subprocess.run([sys.executable, "-m", "harness", "check", f"{FAULTS}:hiccup_once", "--max-examples", "30",
                           "--timeout", "2", "--world-sizes", "2-2", "--seed", "3", "--json", str(out), "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "planted-hiccup.done").exists()  # the hang did happen
    [warning] = [line for line in done.stdout.splitlines() if line.startswith("warning: ")]
    assert warning.startswith("warning: a hang on W=") and "never came back in 3 replays" in warning, warning
    document = json.loads(out.read_text())
    assert document["verdict"] == "pass" and document["violations"] == [] and document["examples"] >= 30
    assert [w["status"] for w in document["unattributed"]] == ["not reproduced"] and document["warnings"]


def test_the_api_warns_where_the_cli_prints_a_warning_line() -> None:
    case = Case(ranks=(RankSpec((3,)), RankSpec((3,))))
    hang = Finding("no-hang-no-crash", "hang", case, "hang: no rank returned", [], status="not reproduced",
                   replays=(0, 3))
    report = CheckReport("t:f", Contract(), 10, 1.0, [], unattributed=[hang])
    assert report.verdict == "pass" and report.to_json()["warnings"] == [hang.warning()]
    with pytest.warns(UnreproducedFaultWarning, match="is not counted: it never came back in 3 replays"):
        warn_unattributed(report)


@pytest.mark.slow
def test_a_hang_that_replays_reproduce_is_a_finding(pool) -> None:
    report = run_check(f"{FAULTS}:hang_rank1", Contract(), max_examples=20, timeout_s=2.0, pool=pool, seed=1,
                       base_settings=CI, shrink_budget_s=2.0)
    [finding] = report.findings
    assert (finding.property, finding.kind, finding.status) == ("no-hang-no-crash", "hang", "confirmed")
    assert not report.unattributed


@pytest.mark.slow
def test_a_hang_after_a_certain_earlier_case_is_a_finding_with_that_history(pool) -> None:
    """Case by case (``ahead=False``): with the batches (the default) this seed and budget met no
    hang (measured 2026-11-28); they run the strata grouped by layout, so in another order, and a
    history-dependent fault depends on the order."""
    report = run_check(f"{FAULTS}:hangs_after_float64", Contract(), max_examples=30, timeout_s=2.0, pool=pool, seed=1,
                       base_settings=CI, shrink_budget_s=2.0, ahead=False)
    assert len(report.findings) == 1, (report.examples, report.warnings(), [finding_message(f) for f in report.unattributed])
    [finding] = report.findings
    assert (finding.kind, finding.status) == ("hang", "history-dependent"), finding_message(finding)
    assert [case.dtype for case, _ in finding.history] == ["float64"]
    assert finding.case.dtype != "float64" and not report.unattributed


def test_a_rank_that_raised_lands_in_one_place_whether_its_peers_blocked_or_returned() -> None:
    """Rank 1 raised in the backward; rank 0 either waited for it (a fault) or returned (with no
    output here): a race between them, which must not change the property (and the bucket
    Hypothesis shrinks it in)."""
    case = Case(ranks=(RankSpec((0,)), RankSpec((0,))), grad="sum")
    raised = record_error(RankResult(rank=1), IndexError("tuple index out of range"), "backward")
    blocked = check_outcome(Outcome(case, [None, raised], fault="exception"))
    returned = check_outcome(Outcome(case, [RankResult(rank=0), raised]))
    for violations in (blocked, returned):
        assert (violations[0].property, violations[0].kind, violations[0].rank) == ("gradients", "exception", 1)
    assert "rank 0 did not return" in blocked[0].message


def test_an_exception_of_several_lines_is_named_by_its_first() -> None:
    """CUDA's device-side assert ends its message with a hint; the finding's line must say what
    was raised (measured on an H100: it said "raised in the forward: Compile with
    `TORCH_USE_CUDA_DSA` to enable device-side assertions.")."""
    def fault() -> None:
        raise RuntimeError("CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA` to enable.")

    try:
        fault()
    except RuntimeError as exc:
        raised = record_error(RankResult(rank=0), exc, "forward")
    assert raised.error_line() == "RuntimeError: CUDA error: device-side assert triggered"
    assert record_error(RankResult(rank=0), ValueError("plain"), "forward").error_line() == "ValueError: plain"


@pytest.mark.parametrize("scenario", list(shrinking.SCENARIOS))
@pytest.mark.slow
def test_a_failure_shrinks_to_one_small_case_whatever_the_seed(pool, scenario: str) -> None:
    """Seeds 0-1 here (``benchmarks/shrinking.py`` runs 0-9): one finding, at most 3 ranks and 2
    elements per rank, not cut short -- whether the failure races (a rank raising while its peers
    wait, or not) and whether the probe's own case fails first."""
    for seed in range(2):
        report = shrinking.check(pool, scenario, seed)
        assert shrinking.shrunk(report), (seed, [finding_message(finding) for finding in report.findings])


# -- the harness's own failures: retried where safe, then exit 3 with one line -------------------------


def test_a_capability_measurement_that_keeps_failing_exits_3_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(capabilities, "_MEASURED", {})
    monkeypatch.setattr(capabilities, "MEASURE_TARGET", "tests.planted.faults:measurement_dies")
    status = cli.main(["check", "harness.ragged:gather_sum", "--quiet"])
    err = capsys.readouterr().err
    assert status == 3 and err.count("\n") == 1, err
    assert err.startswith("harness error: the capability measurement of gloo/cpu failed 2 times, each on fresh ranks (last: "
                          "calling tests.planted.faults:measurement_dies on a gloo/cpu set of 2: rank 0 died: exited with "
                          "status 9"), err


def test_a_capability_measurement_that_failed_once_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a rank killed during the measurement by a crowded machine looks like: the second try measures."""
    monkeypatch.chdir(tmp_path)  # where the planted measurement keeps its marker (ranks start here)
    monkeypatch.setattr(capabilities, "_MEASURED", {})
    monkeypatch.setattr(capabilities, "MEASURE_TARGET", "tests.planted.faults:measurement_dies_once")
    with LocalPool(timeout=5.0) as fresh:
        assert capabilities.measure(fresh).supports("float32")
    assert (tmp_path / "planted-hiccup.done").exists()


def test_an_internal_error_exits_3_at_once_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A bug of the harness inside the Hypothesis search stops it at once (never shrunk as the target's)."""
    raised: list[Case] = []

    def broken(outcome: Outcome, **_: object) -> list:
        if hypothesis.currently_in_test_context():
            raised.append(outcome.case)
            raise KeyError("planted")
        return check_outcome(outcome)

    monkeypatch.setenv("GATHER_HARNESS_DIR", str(tmp_path))
    monkeypatch.setattr(session, "check_outcome", broken)
    monkeypatch.setattr(session._Session, "_ahead", lambda self, judge: False)  # cases judged one by one, here
    status = cli.main(["check", "harness.ragged:gather_sum", "--quiet", "--max-examples", "60"])
    err = capsys.readouterr().err
    assert status == 3 and err.count("\n") == 1 and len(raised) == 1, err
    assert err.startswith("harness error: internal error KeyError: 'planted' at test_trust.py:"), err
    assert "KeyError: 'planted'" in (tmp_path / "internal-error.txt").read_text()


def test_an_internal_error_in_the_batches_exits_3_at_once_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same for a search that runs its cases in batches (the default): never a finding."""
    def broken(self: object, batch: object, always_repeat: bool) -> None:
        raise KeyError("planted")

    monkeypatch.setenv("GATHER_HARNESS_DIR", str(tmp_path))
    monkeypatch.setattr(BatchEngine, "_request", broken)
    status = cli.main(["check", "harness.ragged:gather_sum", "--quiet", "--max-examples", "60"])
    err = capsys.readouterr().err
    assert status == 3 and err.count("\n") == 1, err
    assert err.startswith("harness error: internal error KeyError: 'planted' at test_trust.py:"), err


def test_the_concurrency_benchmark_counts_what_it_says(tmp_path: Path) -> None:
    """Its counting only (the benchmark itself runs hundreds of commands: not part of the suite)."""
    correct = concurrency.Start(concurrency.CORRECT, pytest=False, cwd=".")
    buggy = concurrency.Start(concurrency.BUGGY, pytest=True, cwd=".")
    tally = concurrency.Tally()
    tally.add(correct, 0, "")
    tally.add(buggy, 1, "FAIL ...")
    assert tally.met and tally.row("x")[1:4] == ("2", "0: 1, 1: 1", "0")
    tally.add(correct, 1, "")
    tally.add(buggy, 0, "")
    tally.add(correct, 3, "harness error: ...")
    tally.add(correct, 0, "warning\nTraceback (most recent call last):\n  File ...\nRuntimeError: boom")
    assert (tally.crashes, tally.harness_errors, tally.spurious, tally.missed) == (2, 1, 1, 1) and not tally.met
    assert tally.first_crash == "exit 3: harness error: ..."
    assert [start.cwd.endswith("round-0") for start in concurrency.plan(0, 2, str(tmp_path))] == [True] * 3
    assert len({start.cwd for start in concurrency.plan(1, 2, str(tmp_path))}) == 3


# -- bugs confined to one stratum are found, for every seed -----------------------------------------
#: Seeds 0-1 here; ``benchmarks/confined.py --seeds 30`` is the sweep (docs/benchmarks.md).
CONFINED_SEEDS = range(2)


@pytest.mark.parametrize("bug, path", confined.CONFINED, ids=[bug for bug, _ in confined.CONFINED])
@pytest.mark.slow
def test_a_bug_confined_to_a_pair_is_found_for_every_seed(pool, bug: str, path: dict[str, str]) -> None:
    """The strata a default run makes hold its pair of values (a dtype and a value class, or a
    long rank), and some stratum fails (those holding the pair tried first, then those of its
    dtype)."""
    for seed in CONFINED_SEEDS:
        assert confined.pair_missed(pool, bug, path, seed) is None, seed


@pytest.mark.slow
def test_a_bug_confined_to_a_transposed_cotangent_is_found_for_every_seed(pool) -> None:
    """sentence-transformers' gather (torch.distributed.nn's backward on gloo) is wrong only for a
    transposed cotangent on a 2-d input: among the strata a default run makes, those with a
    transposed cotangent fail and only they (or ranks of mixed cotangents)."""
    for seed in CONFINED_SEEDS:
        assert confined.transposed_missed(pool, seed) is None, seed


@pytest.mark.slow
def test_a_confined_bug_is_found_end_to_end_within_the_default_budget(pool) -> None:
    report = run_check(f"{BUGS}:int64_through_float64", Contract(), timeout_s=5.0, pool=pool, seed=7, base_settings=CI)
    [finding] = report.findings
    assert finding.case.dtype == "int64" and finding.status == "confirmed"


# -- the main job is reproducible -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_report_prints_the_same_table_twice(capsys: pytest.CaptureFixture[str]) -> None:
    variants = "pad_unpad_by_value,bolts_sync_function,ours_sum"
    tables = []
    for jobs in (1, 2):  # one at a time, then two: another plan, another history for each variant
        assert catalogue_report.run({"variants": variants, "max_examples": 30, "quiet": True}, jobs=jobs) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1]
    lines = tables[0].splitlines()  # the text table folds its cells at spaces: a row is several lines
    start = next(k for k, line in enumerate(lines) if line.startswith("bolts_sync_function "))
    end = next(k for k in range(start + 1, len(lines)) if not lines[k].startswith(" "))
    row = " ".join(lines[start:end]).split()
    assert all(word in row for word in "(only when ranks' cotangent layouts differ)".split()), lines[start:end]


# -- shrinking and Hypothesis --------------------------------------------------------------------------


def test_shrinking_stops_after_its_step_budget_and_says_why() -> None:
    clock = ShrinkClock(budget_s=30.0)
    clock.failed(0.01, "mismatch")
    assert not any(clock.out_of_time() for _ in range(MAX_SHRINK_STEPS))
    assert clock.out_of_time() and clock.cut_reason == f"after {MAX_SHRINK_STEPS} shrinking steps"


def test_shrinking_stops_after_its_budget_of_faulty_steps() -> None:
    clock = ShrinkClock(budget_s=1.0)
    clock.failed(0.6, "hang")
    assert not clock.out_of_time()
    clock.failed(0.6, "desync")
    assert clock.out_of_time() and "hung, crashed or desynced" in clock.cut_reason


def test_no_private_hypothesis_api() -> None:
    sources = [path.read_text() for folder in ("harness", "strategies", "reference") for path in (ROOT / folder).rglob("*.py")]
    assert not any("_hypothesis_internal" in source or "hypothesis.internal" in source for source in sources)


def test_settings_never_run_the_explain_phase() -> None:
    assert all(phase.name != "explain" for phase in settings(CI).phases)
