"""The pytest plugin: inert without a target; with ``--gather-impl`` one item that runs the check.

Runs happen in-process through ``pytester`` (sharing this worker's warm rank pool) except
the xdist one, which needs real worker processes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pool import Pool

pytest_plugins = ["pytester"]

PLANTED = Path(__file__).with_name("planted_faults.py").read_text()
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
def gathers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, pool: Pool) -> pytest.Pytester:
    """A pytester directory with a gather file and one ordinary test.

    ``pool`` is requested so that the shared pool starts from the project directory, not from
    a pytester directory that is deleted while its forkserver lives on.
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
        "gather-harness: checking */gathers.py:correct",
        "  contract ragged dims=any grad=none dtypes=all; backend gloo/cpu; world sizes 1-3; hypothesis profile *",
        "gather-harness::check[[]*gathers.py:correct[]] PASSED*",
    ])


def test_a_fixed_argument_reaches_the_gather_and_the_header(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:needs_flag", "--gather-kwarg", "flag=True",
                               "--gather-max-examples", "10", "--gather-world-sizes", "1-2", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["  contract ragged dims=any grad=none dtypes=all kwargs(flag=True); backend *"])


def test_buggy_gather_fails_with_the_counterexample_under_xdist(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "--gather-impl", "gathers.py:upcast",
                                          "--gather-dtypes", "float64", "--gather-max-examples", "10")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "property violated: dtype (mismatch)",
        "case: W=1 gloo/cpu float64 *",
        "  [[]dtype] output.dtype=float32, but should be float64 on rank 0",
        "repro: */.gather-harness/repros/gathers.upcast-*/dtype.py",
        "FAILED gather-harness::check*",
    ])
    assert "Traceback" not in result.stdout.str()


def test_env_var_selects_the_target(gathers: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATHER_IMPL", "gathers.py:upcast")
    result = gathers.runpytest("--collect-only", "-q", "--gather-grad", "sum")
    result.stdout.fnmatch_lines(["gather-harness::check[[]*gathers.py:upcast[]]"])
    assert result.ret == 0


def test_a_target_that_cannot_load_fails_its_item(gathers: pytest.Pytester) -> None:
    result = gathers.runpytest("--gather-impl", "gathers.py:nope", "-k", "gather")
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
