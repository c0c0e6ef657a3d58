"""The pytest plugin: inert without a target; with ``--gather-impl`` one item that runs the check.

Runs happen in-process through ``pytester`` (sharing this worker's warm rank pool) except
the xdist one, which needs real worker processes.
"""

from __future__ import annotations

import multiprocessing.sharedctypes  # noqa: F401  (see ``gathers``)
from pathlib import Path

import pytest

from harness.pool.pool import LocalPool

pytest_plugins = ["pytester"]

PLANTED = Path(__file__).parent.joinpath("planted", "faults.py").read_text()
#: planted_faults.correct is correct; ``upcast`` returns float32 for float64 input.
GATHERS = PLANTED + '''

def upcast(x, dim):
    y = correct(x, dim)
    return y.float() if y.dtype == torch.float64 else y


def needs_flag(x, dim, flag=False):
    if not flag:
        raise ValueError("called without flag=True")
    return correct(x, dim)
'''


@pytest.fixture
def gathers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pool: LocalPool) -> pytest.Pytester:
    """A pytester directory with a gather file and one ordinary test.

    ``pool`` is requested so that the shared pool starts from the project directory, not from
    a pytester directory that is deleted while its forkserver lives on.  The rank sets' shared
    memory module is imported up front (above): an in-process run that imported it first
    would take it out of ``sys.modules`` when it ended, and the next rank set started in this
    process could no longer pickle its shared ledger.
    """
    monkeypatch.delenv("GATHER_IMPL", raising=False)
    pytester.makepyfile(gathers=GATHERS, test_other="def test_other():\n    pass\n")
    return pytester


def test_inert_without_a_target(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest()
    result.assert_outcomes(passed=1)
    assert "gather-harness:" not in result.stdout.str() and "gather-harness::" not in result.stdout.str()


def test_correct_gather_passes_and_the_header_names_it(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:correct", "--gather-max-examples", "10",
                               "--gather-world-sizes", "1-3", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "gather-harness: checking gathers.py:correct",
        "  contract ragged dims=any grad=none dtypes=all; backend gloo/cpu; world sizes 1-3; hypothesis profile *",
        "gather-harness::check[[]gathers.py:correct[]] PASSED*",
    ])


def test_a_fixed_argument_reaches_the_gather_and_the_header(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:needs_flag", "--gather-kwarg", "flag=True",
                               "--gather-max-examples", "10", "--gather-world-sizes", "1-2", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["  contract ragged dims=any grad=none dtypes=all kwargs(flag=True); backend *"])


@pytest.mark.slow
def test_buggy_gather_fails_with_the_counterexample_under_xdist(gathers: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # a terminal as wide as a CI log's: the summary line untrimmed
    result = gathers.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--gather-impl", "gathers.py:upcast",
                                          "--gather-dtypes", "float64", "--gather-max-examples", "10")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "gather check failed: dtype (mismatch) at W=1 float64 dim=0 in gathers.py:upcast",
        "*- gather-harness: the counterexample -*",
        "case: W=1 gloo/cpu float64 *",
        "  [[]dtype] output.dtype=float32, but should be float64 on rank 0",
        "minimal repro (plain torch, prints expected vs actual): python .gather-harness/repros/gathers.upcast-*/"
        "dtype_minimal.py",
        "rerun: python -m harness check gathers.py:upcast --dtypes float64 --world-sizes 1-4 --max-examples 10 "
        "--profile * --seed 0",
        # the short summary carries the verdict, under xdist too: the report's crash message
        "FAILED gather-harness::check[[]gathers.py:upcast[]] - dtype (mismatch) at W=1 float64 dim=0 in gathers.py:upcast",
    ])
    assert "Traceback" not in result.stdout.str() and "harness/plugin.py" not in result.stdout.str()


def test_env_var_selects_the_target_and_collect_only_counts_it(gathers: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATHER_IMPL", "gathers.py:upcast")
    result = gathers.runpytest("--collect-only", "-q", "--gather-grad", "sum")
    result.stdout.fnmatch_lines(["test_other.py::test_other", "gather-harness::check[[]gathers.py:upcast[]]",
                                 "2 tests collected in *"])
    assert "no tests collected" not in result.stdout.str()
    assert result.ret == 0


def test_k_selects_the_check_item(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:upcast", "--collect-only", "-q", "-k", "not check")
    result.stdout.fnmatch_lines(["test_other.py::test_other", "1/2 tests collected (1 deselected) in *"])


def test_a_target_that_cannot_load_fails_its_item(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:nope", "-k", "check")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*has no attribute 'nope'"])


@pytest.mark.parametrize(("option", "message"), [
    (["--gather-dtypes", "float33"], "unknown dtype 'float33'"),
    (["--gather-world-sizes", "1-65"], "<= 64"),
    (["--gather-backend", "nccl"], "add --device cuda"),
    (["--gather-max-examples", "0"], "not a positive whole number"),
    (["--gather-kwarg", "flag=Tru"], "--gather-kwarg flag=Tru: 'Tru' is not a Python literal"),
    (["--gather-kwarg", "flag"], "--gather-kwarg 'flag': expected NAME=LITERAL"),
])
def test_bad_options_are_usage_errors(gathers: pytest.Pytester, option: list[str], message: str) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:upcast", *option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: gather-harness: *{message}*"])


#: A suite's own test file: two gathers, one right and one wrong, checked with the fixture, and
#: a third through check_gather itself.
TWO_GATHERS = """
import pytest

from harness import check_gather


@pytest.mark.parametrize(("target", "contract"), [
    ("gathers.py:correct", {"grad": "sum"}),
    ("gathers.py:upcast", {"dtypes": "float64"}),
])
def test_gather(gather_check, target, contract):
    gather_check(target, world_sizes=(1, 2), **contract)


def test_by_hand():
    check_gather("gathers.py:upcast", dtypes="float64", world_sizes=(1, 2), max_examples=5)
"""


@pytest.mark.slow
def test_several_gathers_are_tests_that_fail_like_tests(gathers: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture makes each gather a test (parametrized here) with the session's budget options;
    a failure shows the counterexample, not the harness's source, the summary line its verdict;
    a failed check's notes are in its counterexample, not again in pytest's warnings summary."""
    gathers.makepyfile(test_gathers=TWO_GATHERS)
    monkeypatch.setenv("COLUMNS", "250")  # a terminal as wide as a CI log's: the summary line untrimmed
    result = gathers.runpytest_subprocess("test_gathers.py", "--gather-max-examples", "8", "--gather-seed", "3")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*test_gather[[]gathers.py:upcast-contract1[]]*",
        "E * gather check failed: dtype (mismatch) at W=1 float64 dim=0 in gathers.py:upcast",
        "*- gather-harness: the counterexample -*",
        "note: the target is differentiable (its result requires grad when its input does) but --grad none checks "
        "no gradient*",
        "rerun: python -m harness check gathers.py:upcast --dtypes float64 --world-sizes 1-2 --max-examples 8 "
        "--seed 3",
        "FAILED test_gathers.py::test_gather[[]gathers.py:upcast-contract1[]] - dtype (mismatch) at W=1 float64 dim=0 "
        "in gathers.py:upcast",
        "FAILED test_gathers.py::test_by_hand - dtype (mismatch) at W=1 float64 dim=0 in gathers.py:upcast",
    ])
    assert "GatherNote" not in out and "warnings summary" not in out
    assert "def check_gather" not in out and "harness/frontends/api.py" not in out and "__tracebackhide__" not in out
    assert "--world-sizes 1-2 --max-examples 5 --seed 0" in out  # test_by_hand gave its own budget, no seed


#: A test failing as a failed check does, without ranks: the exception's text (for Python) and the
#: lines a test report tells (:func:`harness.report.text.failure_summary`), with a repro path longer
#: than a line.
TOLD_ONCE = """
from harness.core.errors import check_failed

VERDICT = "values (mismatch) at W=2 float32 dim=0 in gathers.py:wrong"
REPRO = ".gather-harness/repros/" + "a_long_module_name." * 4 + "wrong-0123abcd/values_minimal.py"
TEXT = "gather check failed: " + VERDICT + "\\nthe whole text, for Python"
TOLD = [VERDICT, "case: W=2 gloo/cpu float32 dim=0 | r0 (1,) iota C=ints | r1 (1,) iota C=ints | r2 (1,) iota",
        "  [values] output[0]=101.0 (bits 0x42ca0000), but should be 1.0 (bits 0x3f800000) on rank 0",
        "minimal repro (plain torch, prints expected vs actual): python " + REPRO,
        "rerun: python -m harness check gathers.py:wrong --seed 0"]


def test_check():
    raise check_failed(TEXT, TOLD)
"""


def _section(lines: list[str]) -> list[str]:
    """The counterexample section of a failure's body: its title line to the next section."""
    start = next(n for n, line in enumerate(lines) if "- gather-harness: the counterexample -" in line)
    return lines[start:next(n for n in range(start + 1, len(lines)) if lines[n].startswith(("==", "--", "__")))]


def test_under_ci_a_failed_check_is_told_once_in_80_columns(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``CI`` pytest prints a failure's message whole on the short summary: it is the one-line
    verdict, and the detail is printed once, in the failure's body, each line in 80 columns but a
    path too long for one, which is a line of its own, whole (it was cut mid-word)."""
    pytester.makepyfile(test_told=TOLD_ONCE)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("COLUMNS", "80")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    lines, text = result.stdout.lines, result.stdout.str()
    summary = "FAILED test_told.py::test_check - values (mismatch) at W=2 float32 dim=0 in gathers.py:wrong"
    assert summary in lines and lines[lines.index(summary) + 1].startswith("=="), text
    result.stdout.fnmatch_lines(["E *AssertionError: gather check failed: values (mismatch) at W=2 float32 dim=0 "
                                 "in gathers.py:wrong"])
    assert "the whole text, for Python" not in text and text.count("output[0]=101.0") == 1, text
    assert "failed checks" not in text
    section = _section(lines)
    repro = ".gather-harness/repros/" + "a_long_module_name." * 4 + "wrong-0123abcd/values_minimal.py"
    assert [line.strip() for line in section].count(repro) == 1, section
    assert all(len(line) <= 80 for line in section if line.strip() != repro), section
    assert "rerun: python -m harness check gathers.py:wrong --seed 0" in section


#: The README's pattern: the parametrized gathers' ids are their functions' names.
README_PATTERN = """
import pytest

GATHERS = {"gathers.py:correct": dict(grad="sum"), "gathers.py:upcast": dict(dtypes="float64")}


@pytest.mark.parametrize("target", GATHERS, ids=lambda t: t.split(":")[-1])
def test_gather(gather_check, target):
    gather_check(target, world_sizes=(1, 2), **GATHERS[target])
"""


@pytest.mark.slow
@pytest.mark.parametrize("ci", [True, False], ids=["CI", "no-CI"])
def test_at_80_columns_the_summary_line_is_the_verdict_and_the_detail_is_told_once(
        gathers: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: bool) -> None:
    """The README's pattern at 80 columns: the summary line is the verdict, whole under ``CI``, cut
    at the width elsewhere (verdict first); the detail is in the failure's body once, its repro
    path whole on a line of its own; the failed check's note is not a warning as well."""
    gathers.makepyfile(test_gathers=README_PATTERN)
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("CI", "BUILD_NUMBER"):  # pytest's own test of a CI run
        monkeypatch.delenv(name, raising=False)
    if ci:
        monkeypatch.setenv("CI", "true")
    result = gathers.runpytest_subprocess("test_gathers.py", "--gather-max-examples", "8", "--gather-seed", "3")
    result.assert_outcomes(passed=1, failed=1)
    lines, text = result.stdout.lines, result.stdout.str()
    summary = "FAILED test_gathers.py::test_gather[upcast] - dtype (mismatch) at W=1 float64 dim=0 in gathers.py:upcast"
    if ci:
        assert summary in lines and lines[lines.index(summary) + 1].startswith("=="), text
    else:
        assert [line for line in lines if line.startswith("FAILED")] == [summary[:77] + "..."], text
    assert text.count("output.dtype=float32, but should be float64") == 1 and "failed checks" not in text, text
    assert "GatherNote" not in text and text.count("is differentiable") == 1, text
    section = _section(lines)
    paths = [line.strip() for line in section if line.endswith("dtype_minimal.py")]
    assert len(paths) == 1 and (gathers.path / paths[0]).is_file(), section
    assert all(len(line) <= 80 for line in section), section


@pytest.mark.slow
def test_how_a_target_is_called_is_said_under_v_not_as_a_warning(gathers: pytest.Pytester) -> None:
    """Our gather's group is optional: every run said so in 4 GatherNote warnings, which ask for nothing."""
    gathers.makepyfile(test_ours="def test_ours(gather_check):\n"
                                 "    gather_check('harness.ragged:all_gather_ragged', grad='sum', world_sizes=(1, 2))\n")
    quiet = gathers.runpytest_subprocess("test_ours.py", "--gather-max-examples", "5")
    quiet.assert_outcomes(passed=1)
    assert "is optional" not in quiet.stdout.str() and "GatherNote" not in quiet.stdout.str()
    verbose = gathers.runpytest_subprocess("test_ours.py", "-v", "--gather-max-examples", "5")
    verbose.stdout.fnmatch_lines(["*gather-harness: how test_ours.py::test_ours called its target*",
                                  "note: the group of all_gather_ragged is optional*"])
