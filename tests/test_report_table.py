"""The catalogue report's table: within 120 columns, the same on every run, and the one the docs show.

- the text fits :data:`~harness.report.catalogue_table.WIDTH` columns, folded at spaces, never cut;
- a row whose outcome a known torch race decides reads the same whatever this run's timing;
- shrinking and the confirmation's history search are bounded by counts, never by seconds;
- the plan that shares the variants between the workers is fixed by the specs alone;
- Ctrl-C leaves no process and no file behind;
- the documented table (``docs/report.md`` where it exists, else the README) is a real run's
  ``report --markdown`` and agrees with the verdicts ``tests/test_catalogue.py`` asserts.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.case import Case, RankSpec
from harness.core.compare import Violation
from harness.core.contract import COLLECTIVES
from harness.frontends import catalogue_report
from harness.frontends.catalogue_report import plan
from harness.report import catalogue_table
from harness.report.catalogue_table import HEADER, WIDTH, Row, folded_table, short_contract, text_report
from harness.search import confirm
from harness.search.results import CheckReport
from harness.search.shrinking import ShrinkClock
from harness.settings.options import resolved
from harness.variants import CATALOGUE, by_name

ROOT = Path(__file__).resolve().parent.parent

# -- the text fits 120 columns -------------------------------------------------------------------------

words = st.text(alphabet="abcdefghij_()|=,.", min_size=1, max_size=12)
cells = st.lists(words, max_size=12).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(cells, min_size=5, max_size=5), min_size=1, max_size=6))
def test_a_folded_table_fits_and_keeps_every_word_in_order(rows: list[list[str]]) -> None:
    header = ["variant", "claimed", "verdict", "failing", "de facto grad"]
    rows = [[f"name_{i}", *row[1:]] for i, row in enumerate(rows)]
    text = folded_table(header, rows, width=80, fixed=(0,))  # words of 12 at most: 80 is always enough
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    # each row's cells read back word for word, column by column (continuation lines have no name)
    rule = next(k for k, line in enumerate(lines) if set(line) <= {"-", " "})
    starts = [k for k, line in enumerate(lines) if k > rule and line[:1].strip()]
    widths = [len(dashes) for dashes in lines[rule].split()]
    offsets = [sum(widths[:i]) + 2 * i for i in range(len(widths))]
    for row, start, end in zip(rows, starts, [*starts[1:], len(lines)]):
        for column, cell in enumerate(row):
            pieces = [line[offsets[column]:offsets[column] + widths[column]].strip() for line in lines[start:end]]
            assert " ".join(piece for piece in pieces if piece).split() == cell.split(), (cell, text)


@dataclass
class _Found:
    """What :class:`Row` reads of a finding."""

    property: str
    case: Case
    status: str = "confirmed"
    condition: str = ""
    notes_: list[str] = field(default_factory=list)

    def reproducible(self) -> bool:
        return self.status == "confirmed"


def _case(world: int, length: int = 3) -> Case:
    return Case(ranks=tuple(RankSpec((length, 2), layout="transposed" if r % 2 else "contiguous")
                            for r in range(world)), dim=0, dtype="complex128", grad="sum")


def _row(name: str, found: list[_Found] | None = None) -> Row:
    spec = by_name(name)
    report = CheckReport(spec.target, spec.contract, 60, 1.0, list(found or []), de_facto={"sum": 3}, graded_cases=3)
    return Row(spec, report)


def test_the_text_report_fits_120_columns_and_starts_with_what_to_do_next() -> None:
    rows = [_row(spec.name, [_Found("values", _case(4, 10 ** 6))] if i % 3 == 0 else [])
            for i, spec in enumerate(CATALOGUE)]
    header = [column for column in HEADER if column != "misuse"]
    text = text_report(catalogue_table.collective_sections(rows, header), header,
                       catalogue_table.intermittent_lines(rows) + [catalogue_table.not_checked_lines()], "caps")
    assert max(len(line) for line in text.splitlines()) <= WIDTH, text
    intro = " ".join(text.split("\n\n")[0].split())
    assert "what its authors claim" in intro and "python -m harness check --help" in intro
    assert f"\n\n    {catalogue_table.NEXT_COMMAND}\n\n" in text
    for name in ("funcol_all_gather_into_tensor_coalesced", "rs_funcol_reduce_scatter_tensor_autograd"):
        assert f"\n{name}  " in text  # a variant's name is never folded
    # every minimal case is a numbered note under its table, whole
    notes = re.findall(r"^\[(\d+)\] (\S+): (.*(?:\n    .*)*)", text, re.MULTILINE)
    in_order = sorted(rows, key=lambda row: list(COLLECTIVES).index(row.spec.contract.collective))
    assert [name for _, name, _ in notes] == [row.spec.name for row in in_order if row.cells()["minimal counterexample"]]
    assert [int(number) for number, _, _ in notes] == list(range(1, len(notes) + 1))
    first = next(" ".join(case.split()) for _, name, case in notes if name == rows[0].spec.name)
    assert first == _case(4, 10 ** 6).describe()


def test_a_race_row_reads_the_same_whatever_the_run_saw() -> None:
    """The verdict of a variant with a known race comes from its spec: a run that lost the race
    (an intermittent finding) prints what a run that did not prints."""
    name = "funcol_all_gather_single"
    race = by_name(name).race
    assert race is not None and (ROOT / race.doc).is_file()
    quiet_run = _row(name).cells()
    lost_race = _row(name, [_Found("values", _case(2), status="intermittent")]).cells()
    assert quiet_run == lost_race
    assert quiet_run["verdict"] == f"intermittent (torch race: {race.doc})"
    # a reproducible finding off the race's dtypes is a failure like any other
    assert _row(name, [_Found("gradients", _case(2))]).cells()["verdict"] == "fail"


def test_a_race_rows_search_leaves_the_racy_dtypes_out(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}

    def execute(options, pool, prepared, on_example=None):  # noqa: ANN001, ANN202
        seen["dtypes"] = options.contract.dtypes
        raise RuntimeError("stop here")

    monkeypatch.setattr(catalogue_report.api, "prepare", lambda options, pool: None)
    monkeypatch.setattr(catalogue_report.api, "execute", execute)
    spec = by_name("funcol_mesh2d")
    row = catalogue_report.check_variant(spec, None, "", settings=resolved({"max_examples": 1, "timeout": 1.0}, "report"),
                                         quiet=True)
    assert row.error == "RuntimeError: stop here"
    assert seen["dtypes"] == tuple(d for d in spec.contract.dtypes if d not in spec.race.dtypes)
    assert set(spec.race.dtypes) <= set(spec.contract.dtypes)


def test_the_race_rows_are_the_catalogue_tests_intermittent_ones() -> None:
    from tests.test_catalogue import INTERMITTENT

    assert {spec.name for spec in CATALOGUE if spec.race} == set(INTERMITTENT)


# -- bounded by counts ---------------------------------------------------------------------------------

def test_shrinking_with_a_fault_step_budget_ignores_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    clock = ShrinkClock(budget_s=0.001, fault_steps=3, max_steps=50)
    for _ in range(3):
        clock.failed(3600.0, "hang")  # an hour each: seconds do not count
        now[0] += 3600.0
        assert not clock.out_of_time()
    clock.failed(0.1, "crash")
    assert clock.out_of_time() and "after 3 shrinking steps that hung" in clock.cut_reason


def test_shrinking_stops_after_the_reports_step_budget() -> None:
    clock = ShrinkClock(budget_s=30.0, fault_steps=3, max_steps=5)
    clock.failed(0.01, "mismatch")
    assert not any(clock.out_of_time() for _ in range(5))
    assert clock.out_of_time() and clock.cut_reason == "after 5 shrinking steps"


def test_the_history_search_is_bounded_by_replays_not_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure that needs most of its history (none of it alone) is replayed at most
    HISTORY_REPLAYS times, and to the same history whether the replays are fast or slow."""
    history = tuple((replace(_case(1), ranks=(RankSpec((k, 2)),)), False) for k in range(40))
    outcomes = []
    for step_s in (0.0, 1000.0):  # a clock that never moves, and one that jumps at every look
        now = [0.0]

        def clock(step_s: float = step_s) -> float:
            now[0] += step_s
            return now[0]

        monkeypatch.setattr(time, "monotonic", clock)
        finding = replace(_Finding(), seen_after=history)
        calls: list[int] = []

        def replay(case, earlier, calls=calls):  # noqa: ANN001, ANN202
            calls.append(len(earlier))
            return [Violation("stable", "mismatch", 0, "differs")] if len(earlier) >= 30 else []

        confirm._with_history(finding, replay)
        assert len(calls) <= confirm.HISTORY_REPLAYS + len(history)
        assert finding.status == "history-dependent" and 30 <= len(finding.history) <= 40
        outcomes.append((calls, finding.history))
    assert outcomes[0] == outcomes[1]


def _Finding():  # noqa: N802, ANN202
    from harness.search.finding import Finding

    return Finding("values", "mismatch", _case(1), "message", [])


# -- the plan ------------------------------------------------------------------------------------------

def test_one_job_per_core_at_most_two_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(catalogue_report.JOBS_ENV, raising=False)
    for cores, jobs in ((1, 1), (2, 2), (3, 2), (64, 2)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert catalogue_report.default_jobs() == jobs
    monkeypatch.setenv(catalogue_report.JOBS_ENV, "2")
    assert catalogue_report.default_jobs() == 2


def test_the_plan_is_fixed_by_the_specs_and_checks_each_variant_once() -> None:
    specs = list(CATALOGUE)
    shares = plan(specs, 2)
    assert shares == plan(list(CATALOGUE), 2)
    assert sorted(i for share in shares for i in share) == list(range(len(specs)))
    assert all(share == sorted(share) for share in shares)
    cost = [sum(catalogue_report.COSTS_S.get(specs[i].name, catalogue_report.COST_S) for i in share) for share in shares]
    cost[1] += catalogue_report.WORKER_START_S
    longest = max(catalogue_report.COSTS_S.values(), default=catalogue_report.COST_S)
    assert abs(cost[0] - cost[1]) <= longest, cost
    assert plan(specs[:1], 2) == [[0]]


# -- Ctrl-C --------------------------------------------------------------------------------------------

def _interruptible() -> None:
    """Ctrl-C's default in the child, whatever this process inherited: a job started in the
    background by a script (``.ci/run &``) ignores SIGINT, and so would the report, which Python
    then never interrupts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _marked(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            pids.append(int(entry))
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.slow  # a report of four variants in a subprocess, interrupted
def test_ctrl_c_leaves_no_process_and_no_file(tmp_path: Path) -> None:
    """Nothing in the working directory but the harness's own hidden one (Hypothesis's caches: every
    run's), no rank directory in the temporary one (torch's and multiprocessing's own caches there
    are every run's too, interrupted or not), no process."""
    marker = f"I38_REPORT_MARK={uuid.uuid4().hex}"
    # a short temporary folder: the forkserver's socket path must fit AF_UNIX's 108 bytes, which
    # pytest-xdist's tmp_path (popen-gwN/test_...) can pass
    cwd, tmp = tmp_path / "cwd", Path(tempfile.mkdtemp(prefix="i38-"))
    cwd.mkdir()
    try:
        env = {**{k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")},
               marker.split("=")[0]: marker.split("=")[1], "TMPDIR": str(tmp),
               catalogue_report.JOBS_ENV: "2"}
        err = ""
        report = subprocess.Popen([sys.executable, "-m", "harness", "report", "--variants",
                                   "a2a_nn_all_to_all,rs_nn_reduce_scatter,ours_sum,ours_local"],
                                  cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True, preexec_fn=_interruptible)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(_marked(marker)) < 6:  # the worker (two jobs) and ranks are up
                time.sleep(0.5)
            time.sleep(3)
            # what a terminal's Ctrl-C does: SIGINT to the whole foreground group; again if it was lost
            # (Python ignores a KeyboardInterrupt raised in a garbage-collector callback, as Hypothesis has)
            while report.poll() is None and time.monotonic() < deadline + 60:
                os.killpg(report.pid, signal.SIGINT)
                try:
                    _, err = report.communicate(timeout=5)
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if report.poll() is None:
                os.killpg(report.pid, signal.SIGKILL)
        assert report.returncode == 130, err
        # no child's traceback (multiprocessing prints "Process <name>:" above one); the driver's own
        # "Exception ignored in ... gc_callback" is Python's, when Ctrl-C lands in Hypothesis's GC hook
        assert "Process gather-" not in err, err
        deadline = time.monotonic() + 10
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _marked(marker)
        assert [path.name for path in cwd.iterdir()] in ([], [".gather-harness"])
        assert not [path for path in tmp.iterdir() if path.name.startswith("gather-harness-")], list(tmp.iterdir())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the documented table ------------------------------------------------------------------------------

MARKDOWN_HEADER = "| " + " | ".join(column for column in HEADER if column != "misuse") + " |"


def documented_table() -> tuple[Path, list[list[str]]]:
    """The catalogue table the docs show: ``docs/report.md`` where it exists, else the README;
    every section's rows (found by their header line), in order."""
    path = ROOT / "docs" / "report.md"
    path = path if path.is_file() and MARKDOWN_HEADER in path.read_text() else ROOT / "README.md"
    text = path.read_text()
    rows = []
    for start in (index for index in range(len(text)) if text.startswith(MARKDOWN_HEADER, index)):
        for line in text[start:].split("\n\n")[0].splitlines()[2:]:
            rows.append([cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    return path, rows


def properties_of(failing: str) -> set[str]:
    """``values (only when ...), stable (after earlier cases)`` -> {values, stable}."""
    return {part.split(" (")[0].strip() for part in re.sub(r"\([^)]*\)", "", failing).split(",") if part.strip()}


def test_the_documented_table_is_the_catalogue_with_the_verdicts_the_tests_assert() -> None:
    """Each row as a real ``report --markdown`` prints it (names, order, claims, the race rows'
    wording), with the verdict and failing property ``tests/test_catalogue.py`` asserts."""
    from tests.test_catalogue import INTERMITTENT, KNOWN_FLAWS, MUST_PASS

    path, rows = documented_table()
    printed = sorted(CATALOGUE, key=lambda spec: list(COLLECTIVES).index(spec.contract.collective))
    assert [(row[0], row[1]) for row in rows] == [(spec.name, short_contract(spec.contract)) for spec in printed], path
    for (name, _claimed, verdict, failing, minimal, de_facto) in rows:
        spec = by_name(name)
        if name in MUST_PASS:
            assert (verdict, failing, minimal) == ("pass", "", ""), name
            grads = spec.contract.grad if spec.contract.grad != "none" else "n/a"
            assert grads in de_facto.split("="), (name, de_facto)
        elif name in INTERMITTENT:
            assert spec.race is not None
            assert verdict == f"intermittent (torch race: {spec.race.doc})", name
            assert failing == f"{spec.race.shows} (torch race)", name
            assert minimal == f"{', '.join(spec.race.dtypes)} not drawn: a race decides there", name
        else:
            expected, _minimal, _why = KNOWN_FLAWS[name]
            assert verdict == "fail" and properties_of(failing) & set(expected), (name, failing)
            assert minimal.startswith(("W=", "reduce-scatter(", "all-to-all W=", "all-reduce(", "split W=", "copy W=", "broadcast(",
                                       "scatter(", "reduce(", "gather-to(")), \
                (name, minimal)
