"""``check_gather``: the Python API other projects call from their own test suites."""

from __future__ import annotations

import functools
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from harness import check_gather
from harness.core.contract import UsageError
from harness.frontends.api import GatherNote, target_of
from harness.pool.pool import LocalPool
from harness.ranks.targets import TargetError
from harness.settings import files
from tests.budgets import COMMAND_TIMEOUT_S, SCRIPT_TIMEOUT_S
from tests.planted import faults as planted_faults

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).parent.joinpath("planted", "faults.py").read_text()
#: ``upcast`` returns float32 for float64 input.
UPCAST = PLANTED + '''

def upcast(x, dim):
    y = correct(x, dim)
    return y.float() if y.dtype == torch.float64 else y
'''


@pytest.mark.slow
def test_failure_is_an_assertion_error_with_the_counterexample(pool: LocalPool, tmp_path: Path) -> None:
    (tmp_path / "gathers.py").write_text(UPCAST)
    with pytest.raises(AssertionError) as raised:
        check_gather(f"{tmp_path}/gathers.py:upcast", dtypes=["float64"], max_examples=10, repro_dir=tmp_path)
    text = str(raised.value)
    lines = text.splitlines()
    # The first line is the verdict (pytest's short summary shows it) and the target.
    assert lines[0] == f"gather check failed: dtype (mismatch) at W=1 float64 dim=0 in {tmp_path}/gathers.py:upcast"
    assert lines[1].startswith(f"checked {tmp_path}/gathers.py:upcast: ragged dims=any grad=none dtypes=float64 "
                               f"output=tensor; ")
    assert lines[1].endswith(", seed 0")
    assert "property violated: dtype (mismatch)\ncase: W=1 gloo/cpu float64 dim=0" in text
    assert "  [dtype] output.dtype=float32, but should be float64 on rank 0" in text
    repro = next(line.split(" ", 1)[1] for line in lines if line.startswith("repro: "))
    assert Path(repro).is_file() and Path(repro).parent.parent == tmp_path and Path(repro).name == "dtype.py"
    assert Path(repro).with_name("dtype_minimal.py").is_file()
    rerun = [line for line in lines if line.startswith(("rerun: ", "   or: "))]
    assert rerun[0].startswith("rerun: pytest tests/test_api.py::test_failure_is_an_assertion_error")
    assert rerun[1] == (f"   or: python -m harness check {tmp_path}/gathers.py:upcast --dtypes float64 "
                        f"--world-sizes 1-4 --max-examples 10 --seed 0")
    assert lines[-1] == "how to read a case line: python -m harness explain-case"


@pytest.mark.slow
def test_the_cli_command_in_a_failure_runs_the_same_check(pool: LocalPool, tmp_path: Path) -> None:
    """The ``or: python -m harness check ...`` line fails the same way (same case, same seed)."""
    (tmp_path / "gathers.py").write_text(UPCAST)
    with pytest.raises(AssertionError) as raised:
        check_gather(f"{tmp_path}/gathers.py:upcast", dtypes="float64", world_sizes=(1, 2), max_examples=10,
                     repro_dir=tmp_path / "api")
    command = next(line for line in str(raised.value).splitlines() if line.startswith("   or: python -m harness"))
    args = shlex.split(command.removeprefix("   or: python -m harness "))
    done = subprocess.run([sys.executable, "-m", "harness", *args, "--quiet", "--repro-dir", str(tmp_path / "cli")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 1, done.stdout + done.stderr
    case = next(line for line in str(raised.value).splitlines() if line.startswith("case: "))
    assert case in done.stdout


def test_notes_are_warnings(pool: LocalPool) -> None:
    """A differentiable target checked with grad none gets no gradient check: a GatherNote says so."""
    with pytest.warns(GatherNote, match=r"differentiable \(an autograd.Function\) but --grad none checks no gradient"):
        check_gather(f"{ROOT}/examples/gather_layer.py:GatherLayer", ragged=False, world_sizes=(1, 2), max_examples=5)


def test_a_module_level_callable_passes_and_returns_the_report(pool: LocalPool) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        report = check_gather(planted_faults.correct, world_sizes=(1, 3), max_examples=10, seed=1)
    assert (report.verdict, report.target, report.findings) == ("pass", "tests.planted.faults:correct", [])
    assert (report.examples, report.shrink_steps) == (10, 0)
    # ``correct`` carries gradients: said as a note, which a non-differentiable gather does not get
    assert [str(w.message) for w in seen if w.category is GatherNote] == [
        'gather-harness: the target is differentiable (its result requires grad when its input does) but --grad '
        'none checks no gradient: add --grad sum (or local, mean; grad="sum" from Python)']
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_gather("tests.planted.bugs:forgot_unpad", ragged=False, world_sizes=(1, 2), max_examples=5)
    assert not [w for w in seen if w.category is GatherNote]


@pytest.mark.slow
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
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
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
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "gathers.py").write_text("def gather(x, dim):\n    return x\n")
    assert target_of("sub/gathers.py:gather") == f"{tmp_path}/sub/gathers.py:gather"
    assert target_of("tests.planted.faults:correct") == "tests.planted.faults:correct"


@pytest.mark.parametrize(("target", "message"), [
    ("missing.py:gather", "target file 'missing.py' does not exist"),
    ("no.such.module:gather", "target module 'no.such.module' cannot be found"),
    ("gather", "is not of the form package.module:attr"),
])
def test_a_target_that_is_not_there_is_told_before_any_rank_starts(target: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        target_of(target)


def test_bad_arguments_raise_before_any_search(pool: LocalPool) -> None:
    with pytest.raises(UsageError, match="unknown dtype 'float33'"):
        check_gather(planted_faults.correct, dtypes="float33")
    with pytest.raises(UsageError, match="cannot all_gather int16"):
        check_gather(planted_faults.correct, dtypes=["int16"])
    with pytest.raises(TargetError, match="has no attribute 'nope'"):
        check_gather("tests.planted.faults:nope")
    with pytest.raises(UsageError, match=r"kwargs\['sizes'\]=<object object at .*only Python literals"):
        check_gather(planted_faults.correct, kwargs={"sizes": object()})


def test_fixed_arguments_reach_every_call(pool: LocalPool) -> None:
    """``kwargs=`` is ``--kwarg``: Lightning's ``sync_grads=True`` makes the stack differentiable."""
    target = f"{Path(__file__).parent.parent}/examples/sync_grads.py:all_gather"
    report = check_gather(target, grad="sum", kwargs={"sync_grads": True}, max_examples=10)
    assert report.convention is not None
    assert report.convention.forms == ("all_gather(x, group=group, sync_grads=True)", "all_gather(x, sync_grads=True)")
    with pytest.raises(UsageError, match="^--grad sum: .* requires grad on none of the probe's cases.*did you mean "
                                         "--kwarg sync_grads=True"):
        check_gather(target, grad="sum", max_examples=10)  # without the switch: the contract's mistake, exit 2


@pytest.mark.slow
def test_a_seed_draws_the_same_cases_and_failures_are_saved_to_the_database(pool: LocalPool, tmp_path: Path) -> None:
    """The seed fixes the search, and the example database still gets the failure (``hypothesis.seed``
    alone would switch the database off: it did, silently, until the soak benchmark measured it)."""
    from hypothesis import settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    from harness.core.contract import Contract
    from harness.search.engine import run_check
    from harness.search.results import Progress

    def cases(seed: int) -> list[str]:
        seen = Progress()

        def keep(progress: Progress) -> None:
            nonlocal seen
            seen = progress

        run_check("tests.planted.faults:correct", Contract(world_sizes=(1, 2)), max_examples=30, seed=seed, pool=pool,
                  on_example=keep, base_settings=settings(database=None))
        # batches of several world sizes come back in any order: the seed fixes which cases run
        return sorted(case.to_json() for case, _ in seen.seen)

    assert cases(7) == cases(7) != cases(8)
    database = tmp_path / "examples"
    report = run_check("tests.planted.bugs:reversed_ranks", Contract(world_sizes=(1, 2)), max_examples=30, seed=7,
                       pool=pool, base_settings=settings(database=DirectoryBasedExampleDatabase(database)))
    assert report.verdict == "fail"
    assert [path for path in database.rglob("*") if path.is_file()], "the failure was not saved"


def test_one_repro_folder_per_target_however_it_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pkg/mod.py:f`` (the command line) and ``pkg.mod:f`` (the Python API, or the function itself)
    are one target: one folder, named without importing anything."""
    (tmp_path / "mytrain").mkdir()
    (tmp_path / "mytrain" / "__init__.py").write_text("raise RuntimeError('a package that must not run here')\n")
    (tmp_path / "mytrain" / "dist_utils.py").write_text("def gather(x, dim):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    by_file = files.target_slug(target_of("mytrain/dist_utils.py:gather"))
    assert by_file == files.target_slug(target_of("mytrain.dist_utils:gather"))
    assert by_file.startswith("dist_utils.gather-")
    assert "mytrain" not in sys.modules
