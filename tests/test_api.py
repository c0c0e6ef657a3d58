"""``check_gather``: the Python API other projects call from their own test suites."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

from harness import check_gather
from harness.api import target_of
from harness.contract import UsageError
from harness.pool import Pool
from harness.targets import TargetError
from tests import planted_faults

PLANTED = Path(__file__).with_name("planted_faults.py").read_text()
#: ``upcast`` returns float32 for float64 input.
UPCAST = PLANTED + '''

def upcast(x, dim):
    y = correct(x, dim)
    return y.float() if y.dtype == torch.float64 else y
'''


def test_failure_is_an_assertion_error_with_the_counterexample(pool: Pool, tmp_path: Path) -> None:
    (tmp_path / "gathers.py").write_text(UPCAST)
    with pytest.raises(AssertionError) as raised:
        check_gather(f"{tmp_path}/gathers.py:upcast", dtypes=["float64"], max_examples=10, repro_dir=tmp_path)
    text = str(raised.value)
    assert text.startswith("property violated: dtype (mismatch)\ncase: W=1 gloo/cpu float64 dim=0")
    assert "  [dtype] output.dtype=float32, but should be float64 on rank 0" in text
    repro = next(line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("repro: "))
    assert Path(repro).is_file() and Path(repro).parent.parent == tmp_path and Path(repro).name == "dtype.py"


def test_a_module_level_callable_passes_and_returns_the_report(pool: Pool) -> None:
    report = check_gather(planted_faults.correct, world_sizes=(1, 3), max_examples=10, seed=1)
    assert (report.verdict, report.target, report.findings) == ("pass", "tests.planted_faults:correct", [])
    assert report.examples >= 10


def test_a_function_of_a_script_is_found_by_its_file(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(UPCAST + '''

if __name__ == "__main__":
    from harness import check_gather

    try:
        check_gather(upcast, dtypes="float64", max_examples=10)
    except AssertionError as exc:
        print(exc)
''')
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "property violated: dtype" in done.stdout and f"repro: {tmp_path}/.gather-harness/repros/script.upcast-" in done.stdout


def local_function() -> object:
    def gather(x: object, dim: int) -> object:
        return x

    return gather


@pytest.mark.parametrize("gather", [lambda x, dim: x, local_function(), functools.partial(planted_faults.correct)],
                         ids=["lambda", "local function", "partial"])
def test_callables_ranks_cannot_import_are_usage_errors(gather: object) -> None:
    with pytest.raises(UsageError, match="must be a module-level function"):
        target_of(gather)


def test_file_targets_become_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert target_of("sub/gathers.py:gather") == f"{tmp_path}/sub/gathers.py:gather"
    assert target_of("pkg.mod:gather") == "pkg.mod:gather"


def test_bad_arguments_raise_before_any_search(pool: Pool) -> None:
    with pytest.raises(UsageError, match="unknown dtype 'float33'"):
        check_gather(planted_faults.correct, dtypes="float33")
    with pytest.raises(UsageError, match="cannot all_gather int16"):
        check_gather(planted_faults.correct, dtypes=["int16"])
    with pytest.raises(TargetError, match="has no attribute 'nope'"):
        check_gather("tests.planted_faults:nope")
    with pytest.raises(UsageError, match=r"kwargs\['sizes'\]=<object object at .*only Python literals"):
        check_gather(planted_faults.correct, kwargs={"sizes": object()})


def test_fixed_arguments_reach_every_call(pool: Pool) -> None:
    """``kwargs=`` is ``--kwarg``: Lightning's ``sync_grads=True`` makes the stack differentiable."""
    target = f"{Path(__file__).parent.parent}/examples/sync_grads.py:all_gather"
    report = check_gather(target, grad="sum", kwargs={"sync_grads": True}, max_examples=10)
    assert report.convention is not None
    assert report.convention.forms == ("all_gather(x, group=group, sync_grads=True)", "all_gather(x, sync_grads=True)")
    with pytest.raises(AssertionError, match="not differentiable"):
        check_gather(target, grad="sum", max_examples=10)


def test_a_seed_draws_the_same_cases_and_failures_are_saved_to_the_database(pool: Pool, tmp_path: Path) -> None:
    """The seed fixes the search, and the example database still gets the failure (``hypothesis.seed``
    alone would switch the database off: it did, silently, until the soak benchmark measured it)."""
    from hypothesis import settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    from harness.contract import Contract
    from harness.search import Progress, run_check

    def cases(seed: int) -> list[str]:
        seen = Progress()

        def keep(progress: Progress) -> None:
            nonlocal seen
            seen = progress

        run_check("tests.planted_faults:correct", Contract(world_sizes=(1, 2)), max_examples=30, seed=seed, pool=pool,
                  on_example=keep, base_settings=settings(database=None))
        return [case.to_json() for case, _ in seen.seen]

    assert cases(7) == cases(7) != cases(8)
    database = tmp_path / "examples"
    report = run_check("tests.planted_bugs:reversed_ranks", Contract(world_sizes=(1, 2)), max_examples=30, seed=7,
                       pool=pool, base_settings=settings(database=DirectoryBasedExampleDatabase(database)))
    assert report.verdict == "fail"
    assert [path for path in database.rglob("*") if path.is_file()], "the failure was not saved"
