"""``python -m harness check``: exit statuses, one-line usage errors, the verdict text, JSON, progress.

The table of bad inputs runs ``cli.main`` in this process (the warm rank pool is shared,
so each costs milliseconds, not a torch start-up); the pass/fail runs start the real
command in a subprocess, as scripts and CI do.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.frontends import commands as cli
from harness.report.text import ProgressLine
from harness.search.results import Progress
from harness.settings import options
from tests.budgets import COMMAND_TIMEOUT_S

PLANTED = Path(__file__).parent.joinpath("planted", "faults.py").read_text()
#: planted_faults.correct is correct; these two are not.
BUGGY = PLANTED + '''

def unpad_by_value(x, dim):
    """Pads to the longest rank, gathers, then drops padding *by value*: real zeros vanish too."""
    world = dist.get_world_size()
    front = x.movedim(dim, 0)
    longest = torch.tensor([front.shape[0]])
    dist.all_reduce(longest, op=dist.ReduceOp.MAX)
    padded = front.new_zeros((int(longest),) + tuple(front.shape[1:]))
    padded[: front.shape[0]] = front
    pieces = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(pieces, padded)
    rows = torch.cat(pieces)
    keep = rows.ne(0) if rows.ndim == 1 else rows.flatten(1).ne(0).any(1)
    return rows[keep].movedim(0, dim)


def float32_result(x, dim):
    """Correct values, but float64 input comes back as float32."""
    y = correct(x, dim)
    return y.float() if y.dtype == torch.float64 else y
'''
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="these are usage errors only without a CUDA device")


@pytest.fixture
def targets(tmp_path: Path) -> Path:
    """A file holding a correct gather (``correct``), two buggy ones, and broken modules."""
    (tmp_path / "gathers.py").write_text(BUGGY)
    (tmp_path / "raises.py").write_text('raise RuntimeError("boom on import")\n')
    (tmp_path / "constant.py").write_text("gather = 42\n")
    (tmp_path / "dies.py").write_text("import os\nos._exit(3)\n")
    (tmp_path / "broken_helper.py").write_text(BROKEN)
    (tmp_path / "uses_broken.py").write_text("import broken_helper\n\n\ndef gather(x, dim):\n    return x\n")
    return tmp_path


BROKEN = "def gather(x, dim):\n    return x +\n"


BAD_INPUTS = [
    pytest.param(["missing.py:gather"], "does not exist", id="missing file"),
    pytest.param(["{d}/gathers.py:nope"], "no attribute 'nope'", id="missing attribute"),
    pytest.param(["{d}/gathers.py:corect"], "no attribute 'corect'; did you mean 'correct'?", id="attribute typo"),
    pytest.param(["{d}/gather.py:correct"], "does not exist; did you mean '{d}/gathers.py'?", id="file name typo"),
    pytest.param(["{d}/gathers.py:correct", "--scatter-dim", "2"], "a re-layout (scatter one dim, gather along "
                 "another) is an all-to-all; gather takes one dim", id="re-layout flags on a gather"),
    pytest.param(["{d}/gathers.py:correct", "--collective", "all-to-all", "--gather-dim", "9"],
                 "--gather-dim: expected any or a dim", id="gather dim 9"),
    pytest.param(["{d}/gathers.py:correct", "--ndims", "0-3"], "--ndims: need 1 <= A <= B <= 4", id="ndims 0-3"),
    pytest.param(["{d}/constant.py:gather"], "not a callable", id="not callable"),
    pytest.param(["{d}/raises.py:gather"], "RuntimeError: boom on import ({d}/raises.py:1)", id="raises on import"),
    # the imported file's own line, as shown_path shows it (relative where the ranks' working directory holds it)
    pytest.param(["{d}/uses_broken.py:gather"], "broken_helper.py:2: return x +)",
                 id="syntax error in a module it imports"),
    pytest.param(["{d}/dies.py:gather"], "died", id="rank dies on import"),
    pytest.param(["no_colon"], "not of the form", id="not a target"),
    pytest.param(["no.such.module:gather"], "cannot be found", id="missing module"),
    pytest.param(["{d}/gathers.py:correct", "--dtypes", "float33"], "unknown dtype 'float33'", id="unknown dtype"),
    pytest.param(["{d}/gathers.py:correct", "--dtypes", "int16"], "cannot all_gather int16", id="int16 on gloo"),
    pytest.param(["{d}/gathers.py:correct", "--backend", "nccl"], "add --device cuda", id="nccl on cpu"),
    pytest.param(["{d}/gathers.py:correct", "--backend", "nccl", "--device", "cuda"], "no CUDA device",
                 id="nccl without gpu", marks=NO_CUDA),
    pytest.param(["{d}/gathers.py:correct", "--device", "cuda"], "no CUDA device", id="cuda without gpu",
                 marks=NO_CUDA),
    pytest.param(["{d}/gathers.py:correct", "--duration", "5", "--max-examples", "5"], "not allowed with",
                 id="duration and max-examples"),
    pytest.param(["{d}/gathers.py:correct", "--duration", "soon"], "not a positive duration", id="bad duration"),
    pytest.param(["{d}/gathers.py:correct", "--world-sizes", "0-3"], "--world-sizes", id="world sizes 0-3"),
    pytest.param(["{d}/gathers.py:correct", "--world-sizes", "1-65"], "<= 64", id="world sizes 1-65"),
    pytest.param(["{d}/gathers.py:correct", "--world-sizes", "few"], "not a range", id="world sizes not a range"),
    pytest.param(["{d}/gathers.py:correct", "--max-examples", "0"], "not a positive whole number",
                 id="max-examples 0"),
    pytest.param(["{d}/gathers.py:correct", "--timeout", "-1"], "not a positive number", id="negative timeout"),
    pytest.param(["{d}/gathers.py:correct", "--dims", "4"], "--dims: expected any or a dim of a 1-4-d input (-4 to 3), "
                 "got '4'", id="dims 4"),
    pytest.param(["{d}/gathers.py:correct", "--dims", "last"], "--dims: expected any or a dim", id="dims last"),
    pytest.param(["{d}/gathers.py:correct", "--dims", "-3", "--ndims", "1-2"], "--dims -3 --ndims 1-2: no input of "
                 "those dims has dim -3", id="dims beyond ndims"),
    pytest.param(["{d}/gathers.py:correct", "--profile", "fast"], "invalid choice", id="unknown profile"),
    pytest.param(["{d}/gathers.py:correct", "--json", "{d}/no/such/dir/out.json"], "does not exist",
                 id="json directory missing"),
    pytest.param([], "required: TARGET", id="no target"),
    pytest.param(["{d}/gathers.py:correct", "--output", "dict"], "invalid choice", id="unknown output"),
]


def test_more_local_ranks_than_the_machine_holds_is_a_usage_error(targets: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("harness.pool.machine.local_world_size_limit", lambda: 4)
    assert cli.main(["check", f"{targets}/gathers.py:correct", "--world-sizes", "2-6"]) == 2
    err = capsys.readouterr().err
    assert "--world-sizes 2-6: 6 local ranks do not fit on this machine: it holds at most 4" in err
    assert "--listen" in err


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS)
def test_bad_input_is_exit_2_with_one_line(targets: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                           message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(targets)
    status = cli.main(["check", *(arg.format(d=targets) for arg in args)])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert message.format(d=targets) in err and "Traceback" not in err and "<frozen" not in err


@pytest.mark.slow
def test_bad_input_in_a_real_process_prints_one_line(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "check", "missing.py:gather")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: target file 'missing.py' does not exist\n"


@pytest.mark.slow
def test_a_reader_that_leaves_early_gets_the_verdicts_status_not_an_internal_error(tmp_path: Path) -> None:
    """``check ... | head -1``: the reader closes the pipe after the first line; the check goes on
    to its verdict (a counterexample: exit 1) and leaves no internal-error file (before: exit 3,
    ``BrokenPipeError``, ``.gather-harness/internal-error.txt``)."""
    (tmp_path / "buggy.py").write_text((Path(__file__).parent.parent / "examples" / "buggy.py").read_text())
    command = [sys.executable, "-m", "harness", "check", "buggy.py:gather", "--max-examples", "50"]
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**environment, "GATHER_HARNESS_PROFILE": "ci"})
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    error = process.stderr.read().decode()
    assert (process.wait(timeout=300), first.startswith(b"gather-harness check")) == (1, True), error
    assert "BrokenPipe" not in error and not (tmp_path / ".gather-harness" / "internal-error.txt").exists()


#: Mistakes answered before torch is imported (and before the rank forkserver starts).
BEFORE_TORCH = [
    (["check", "missing.py:gather"], "target file 'missing.py' does not exist"),
    (["check", "no.such.module:gather"], "target module 'no.such.module' cannot be found"),
    (["check", "pkg.missing:gather"], "target module 'pkg.missing' cannot be found"),
    (["check", "broken.py:gather"], "importing 'broken.py' raised SyntaxError: invalid syntax (broken.py:2: return x +)"),
    (["check", "pkg.broken:gather"], "importing 'pkg.broken' raised SyntaxError: invalid syntax (pkg/broken.py:2: "),
    (["check", "no_colon"], "is not of the form package.module:attr"),
    (["check", "ok.py:gather", "--grad", "summ"], "invalid choice: 'summ'"),
    (["check", "ok.py:gather", "--dtypes", "float33"], "unknown dtype 'float33'"),
    (["check", "ok.py:gather", "--world-sizes", "few"], "not a range"),
    (["check", "ok.py:gather", "--max-examples", "0"], "not a positive whole number"),
    (["check", "ok.py:gather", "--timeout", "soon"], "not a positive number"),
    (["check", "ok.py:gather", "--collective", "reduce", "--src", "1"], "--src is for a broadcast and a scatter"),
    (["check", "ok.py:gather", "--dst", "3"], "gather has no dst"),
    (["check", "ok.py:gather", "--collective", "all-reduce", "--op", "max", "--grad", "sum"], "ties"),
    (["check", "ok.py:gather", "--collective", "all-reduce", "--dims", "1"], "takes no dim"),
    (["fuzz", "missing.py:gather", "--duration", "1"], "target file 'missing.py' does not exist"),
    (["fuzz", "ok.py:gather", "--collective", "reduce", "--src", "1", "--duration", "1"], "--src is for"),
    (["report", "--max-examples", "x"], "not a positive whole number"),
]
EACH_IN_ONE_PROCESS = """
import contextlib, io, json, sys
from harness.frontends.commands import main
answers = []
for args in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(args)
    answers.append([status, err.getvalue(), "torch" in sys.modules])
print(json.dumps(answers))
"""


def test_mistakes_are_answered_before_torch_is_imported(tmp_path: Path) -> None:
    """A wrong option or target path costs milliseconds: torch (and the forkserver) never start.
    ``pkg/__init__.py`` raises: finding ``pkg.broken`` must not run it."""
    (tmp_path / "ok.py").write_text("def gather(x, dim):\n    return x\n")
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('a package the driver must not run')\n")
    (tmp_path / "pkg" / "broken.py").write_text(BROKEN)
    done = subprocess.run([sys.executable, "-c", EACH_IN_ONE_PROCESS, json.dumps([args for args, _ in BEFORE_TORCH])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for (args, message), (status, err, torch_imported) in zip(BEFORE_TORCH, json.loads(done.stdout)):
        assert (status, torch_imported) == (2, False), (args, err)
        assert message in err and err.count("\n") == 1, (args, err)
    assert not (tmp_path / ".hypothesis").exists()


def test_explain_case_and_a_whole_command_line_error_import_no_torch(tmp_path: Path) -> None:
    """The real entry point, as a user runs it: ``-X importtime`` lists every module imported."""
    for args, status in ((["check", "missing.py:gather"], 2), (["explain-case"], 0)):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == status, done.stderr[-2000:]
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert "harness.frontends.commands" in imported and "torch" not in imported, sorted(imported)
    assert "How to read a case line" in done.stdout and "C=ints" in done.stdout


@pytest.mark.slow
def test_correct_gather_passes(targets: Path) -> None:
    done = run_cli(targets, "check", "gathers.py:correct", "--max-examples", "15", "--seed", "7",
                   "--json", "out.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not drawn: int16 (gloo cannot all_gather it)" in done.stdout
    assert "PASS: no counterexample" in done.stdout
    assert "rerun: python -m harness check gathers.py:correct --world-sizes 1-4 --max-examples 15 --seed 7" in done.stdout
    document = json.loads((targets / "out.json").read_text())
    assert {"target", "verdict", "examples", "elapsed_s", "violations"} <= set(document)
    assert (document["target"], document["verdict"], document["violations"]) == ("gathers.py:correct", "pass", [])
    assert (document["examples"], document["shrink_steps"], document["seed"]) == (15, 0, 7)
    assert "PASS: no counterexample in 15 examples (" in done.stdout


@pytest.mark.slow
def test_unpadding_by_value_is_a_counterexample(targets: Path) -> None:
    summary = targets / "summary.md"
    done = run_cli(targets, "check", "gathers.py:unpad_by_value", "--dtypes", "float32", "--world-sizes", "1-2",
                   "--max-examples", "100", "--json", "out.json", "--repro-dir", "bugs", "--quiet",
                   GITHUB_STEP_SUMMARY=str(summary))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL: ") and "property violated: shape (mismatch)" in done.stdout
    assert "[shape] output.shape=" in done.stdout and "but should be" in done.stdout
    document = json.loads((targets / "out.json").read_text())
    violations = document["violations"]
    # The counts add up: the search's examples, then the steps that shrank the failure
    assert document["examples"] + document["shrink_steps"] == document["coverage"]["examples"]
    assert f"in {document['examples']} example" in done.stdout and f" + {document['shrink_steps']} shrinking step" \
        in done.stdout
    violation = next(v for v in violations if v["property"] == "shape")
    assert {"property", "kind", "case", "message", "repro"} <= set(violation)
    assert violation["message"] in done.stdout
    assert Path(violation["repro"]).parent.parent == targets / "bugs" and Path(violation["repro"]).is_file()
    assert f"repro: {violation['repro']}" in done.stdout and "--seed" in done.stdout
    assert "gather-harness check `gathers.py:unpad_by_value`: ❌ fail" in summary.read_text()


@pytest.mark.slow
def test_float32_for_float64_is_a_dtype_counterexample(targets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["check", f"{targets}/gathers.py:float32_result", "--dtypes", "float64", "--max-examples", "10",
                       "--repro-dir", str(targets), "--quiet"])
    out = capsys.readouterr().out
    assert status == 1
    assert "output.dtype=float32, but should be float64 on rank 0" in out


@pytest.mark.slow
def test_duration_replaces_the_example_count(targets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["check", f"{targets}/gathers.py:correct", "--duration", "1s", "--world-sizes", "2-3"])
    out = capsys.readouterr().out
    assert status == 0
    assert "world sizes 2-3" in out and "time budget 1 s" in out and "PASS" in out


@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("30s", 30.0), ("1.5m", 90.0), ("2h", 7200.0)])
def test_duration_units(text: str, seconds: float) -> None:
    assert options.parse_duration(text) == seconds


def test_progress_line_redraws_in_place_on_a_terminal() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, tty=True)
    line.interval_s = 0.0
    progress = Progress(examples=3, failures=1)
    line(progress)
    line(progress)
    line.close()
    text = stream.getvalue()
    assert text.count("\r3 examples") == 2 and "1 property failing" in text and "\n" not in text


def test_progress_line_is_a_plain_line_at_most_every_interval_off_a_terminal() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, tty=False)
    line(Progress(examples=1))  # too soon after start
    line.last_shown -= line.interval_s
    line(Progress(examples=2))
    assert stream.getvalue().startswith("2 examples") and stream.getvalue().count("\n") == 1


def run_cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness ARGS`` in ``cwd``: the ci profile (no example database), no GitHub summary unless given."""
    environment = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    environment.update(env, GATHER_HARNESS_PROFILE="ci")
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S)


def test_a_target_two_namespace_packages_deep_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``outer.inner.mod:f`` with no ``__init__.py`` anywhere: Python computes an inner namespace
    package's path from ``sys.modules``, which raised KeyError ('outer'), exit 3, before."""
    from harness.ranks import targets

    (tmp_path / "outer" / "inner").mkdir(parents=True)
    (tmp_path / "outer" / "inner" / "mod.py").write_text("def f(x, dim):\n    return x\n")
    monkeypatch.chdir(tmp_path)
    assert targets.locate("outer.inner.mod:f") == "outer.inner.mod:f"
    with pytest.raises(targets.TargetError, match="cannot be found"):
        targets.locate("outer.inner.nope:f")


def test_a_repro_path_with_spaces_is_pasted_as_one_argument() -> None:
    import shlex

    from harness.core.case import Case, RankSpec
    from harness.report.text import finding_text
    from harness.search.finding import Finding

    finding = Finding("values", "mismatch", Case(ranks=(RankSpec((1,)),)), "(planted)", [],
                      "/tmp/my project/values.py", minimal_repro="/tmp/my project/values_minimal.py")
    commands = {line.split(": ", 1)[1].split("   or: ")[0] for line in finding_text(finding).splitlines()
                if line.startswith(("  run: ", "minimal repro"))}
    assert {shlex.split(command)[1] for command in commands} == {"/tmp/my project/values.py",
                                                               "/tmp/my project/values_minimal.py"}
