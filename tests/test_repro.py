"""Repro scripts: written for a finding, they fail the same way when run with plain ``python``.

Each test writes a script and runs it in a fresh process, as a user would after a failure.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.case import Case, RankSpec
from harness.core.contract import Contract
from harness.core.conventions import Call
from harness.frontends.api import profile_settings
from harness.pool.pool import LocalPool
from harness.report import minimal_repro, repro
from harness.search.engine import run_check
from harness.search.finding import Finding
from tests.budgets import SCRIPT_TIMEOUT_S
from tests.test_planted_bugs import IN_PLACE_REFUSED, REFUSED

pytestmark = pytest.mark.slow  # each finding is searched for, then its repro script runs in a fresh process

ROOT = Path(__file__).resolve().parent.parent
PLANTED = Path(__file__).parent.joinpath("planted", "faults.py").read_text()
LOCAL_AS_SUM = PLANTED + '''

class _KeepOwnSlot(torch.autograd.Function):
    """Correct values; backward keeps this rank's slot of its *own* cotangent (local, not sum)."""

    @staticmethod
    def forward(ctx, x, dim):
        lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
        dist.all_gather(lengths, torch.tensor([x.shape[dim]]))
        ctx.dim, ctx.start, ctx.length = dim, int(sum(lengths[: dist.get_rank()])), x.shape[dim]
        return correct(x.detach(), dim)

    @staticmethod
    def backward(ctx, grad):
        return grad.narrow(ctx.dim, ctx.start, ctx.length).clone(), None


def local_as_sum(x, dim):
    return _KeepOwnSlot.apply(x, dim)


def drops_zero_rows(x, dim):
    """Unpadding by value: genuine zeros disappear."""
    y = correct(x, dim).movedim(dim, 0)
    keep = y.ne(0) if y.ndim == 1 else y.flatten(1).ne(0).any(1)
    return y[keep].movedim(0, dim)
'''
TWO_RANKS = Case(ranks=(RankSpec((3,), values="padding"), RankSpec((2,))), dtype="float64", grad="sum")


@pytest.fixture
def gathers(tmp_path: Path) -> str:
    path = tmp_path / "gathers.py"
    path.write_text(LOCAL_AS_SUM)
    return str(path)


def find(pool: LocalPool, target: str, contract: Contract) -> Finding:
    report = run_check(target, contract, max_examples=30, seed=3, pool=pool, base_settings=profile_settings("ci"))
    assert report.findings, f"the planted bug in {target} was not found"
    return report.findings[0]


def run_script(path: Path, *prefix: str, cwd: Path, environ: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, str(path)], cwd=cwd, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
                          env={k: v for k, v in (environ or os.environ).items() if k not in ("RANK", "WORLD_SIZE")})


def test_repro_of_a_value_bug_fails_the_same_way(pool: LocalPool, gathers: str, tmp_path: Path) -> None:
    finding = find(pool, f"{gathers}:drops_zero_rows", Contract(dtypes=("float32",), world_sizes=(1, 2)))
    path = repro.write(finding, f"{gathers}:drops_zero_rows", tmp_path / "repros")
    assert path.name == f"{finding.property.replace('-', '_')}.py" and path.parent.parent == tmp_path / "repros"
    done = run_script(path, sys.executable, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # The script judges with the harness's own checks: it prints the very lines the harness printed.
    assert all(violation.describe() in done.stdout for violation in finding.violations), (done.stdout, finding.message)
    assert "the failure reproduces" in done.stdout


def test_repro_of_a_gradient_bug_needs_only_torch(pool: LocalPool, gathers: str, tmp_path: Path) -> None:
    finding = find(pool, f"{gathers}:local_as_sum", Contract(grad="sum", dtypes=("float32",), world_sizes=(2, 2)))
    assert finding.property == "gradients"
    path = repro.write(finding, f"{gathers}:local_as_sum", tmp_path)
    # The target imports the project's gather (harness.ragged); no module of the harness's
    # engine, and no Hypothesis, may be imported by the repro: importing one raises.
    engine = [f"harness.{name}" for name in ("search", "pool", "checks", "case", "contract", "conventions",
                                             "procedure", "reference", "strategies", "api", "cli", "rank")]
    blocked = (f"import runpy, sys; sys.modules.update(dict.fromkeys({engine + ['hypothesis']!r})); "
               "sys.exit(runpy.run_path(sys.argv[1], run_name='__main__'))")
    done = run_script(path, sys.executable, "-c", blocked, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[gradients] grad[0]=" in done.stdout and "but should be" in done.stdout and "contract sum" in done.stdout


def test_repro_passes_when_the_case_is_right(tmp_path: Path) -> None:
    """A module target, found through the directory the repro was written from."""
    finding = Finding("values", "mismatch", dataclasses.replace(TWO_RANKS, grad="none"), "(written by hand)", [])
    path = repro.write(finding, "tests.planted.faults:correct", tmp_path)
    done = run_script(path, sys.executable, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 1: every property holds" in done.stdout
    assert "not reproduced: every rank matched the reference" in done.stdout


def test_a_hang_ends_with_the_watchdog(tmp_path: Path) -> None:
    finding = Finding("no-hang-no-crash", "hang", dataclasses.replace(TWO_RANKS, grad="none"), "hang", [])
    path = repro.write(finding, "tests.planted.faults:hang_rank1", tmp_path, timeout_s=2)
    done = run_script(path, sys.executable, cwd=tmp_path)
    assert done.returncode == 1
    assert "[no-hang-no-crash] rank 1: the case did not finish within 2 s; it is stuck in:" in done.stdout
    assert "hang_rank1" in done.stdout


def test_repro_runs_under_torchrun(gathers: str, tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    finding = Finding("gradients", "mismatch", TWO_RANKS, "local, not sum", [])
    path = repro.write(finding, f"{gathers}:local_as_sum", tmp_path)
    assert f"torchrun --standalone --nproc-per-node 2 {path.name}" in path.read_text()
    torchrun = Path(sys.executable).with_name("torchrun")
    done = run_script(path, str(torchrun), "--standalone", "--nproc-per-node", "2", cwd=tmp_path,
                      environ=subprocess_env)
    assert done.returncode != 0
    gradient_lines = [line for line in done.stdout.splitlines() if line.startswith("[gradients] grad[0]=")]
    assert any(line.endswith("on rank 0") for line in gradient_lines), done.stdout
    assert any(line.endswith("on rank 1") for line in gradient_lines), done.stdout


@pytest.mark.parametrize("source", ["plain", "it's", "'''", "ends with '", "back\\slash\\", '"""', "\\'''\n"])
def test_embedded_source_round_trips(source: str) -> None:
    assert ast.literal_eval(repro._literal(source)) == source


# -- every property's repro reproduces (one implementation of the checks) -------------------------

BUGS = "tests.planted.bugs"
ONE = Case(ranks=(RankSpec((1,)),))
TWO_RAGGED = Case(ranks=(RankSpec((0,)), RankSpec((1,))))
#: property -> (planted bug, the minimal case it fails on, a misuse case?, history)
EVERY_PROPERTY: dict[str, tuple[str, Case, bool, tuple[tuple[Case, bool], ...]]] = {
    "values": ("reversed_ranks", Case(ranks=(RankSpec((1,)), RankSpec((1,)))), False, ()),
    "dtype": ("float64_to_float32", dataclasses.replace(ONE, dtype="float64"), False, ()),
    "shape": ("forgot_unpad", TWO_RAGGED, False, ()),
    "device": ("returns_meta", ONE, False, ()),
    "inputs-untouched": ("squeezes_input", Case(ranks=(RankSpec((1, 2)),)), False, ()),
    "gradients": ("local_only_backward", dataclasses.replace(TWO_RAGGED, grad="sum"), False, ()),
    "stable": ("shared_output_buffer", ONE, False, ()),
    "repeatable": ("degrades_every_third_call", ONE, False, ()),
    "no-hang-no-crash": ("ignores_dim", Case(ranks=(RankSpec((1, 0)), RankSpec((1, 1))), dim=1), False, ()),
    "misuse": ("forgot_unpad", TWO_RAGGED, True, ()),
    "history-dependent": ("caches_sizes", ONE, False, ((Case(ranks=(RankSpec((3,)),)), True),)),
    "inputs-untouched (in place)": ("writes_own_slot_in_place", dataclasses.replace(ONE, grad="local"), False, ()),
}


def planted_finding(prop: str) -> tuple[str, Finding, bool]:
    """The planted bug of ``prop``, and a finding of it as the search would report it."""
    name, case, misuse, history = EVERY_PROPERTY[prop]
    reported = {"history-dependent": "values", "inputs-untouched (in place)": "inputs-untouched"}.get(prop, prop)
    return name, Finding(reported, "mismatch", case, "(planted)", [], history=history), misuse


@pytest.mark.parametrize("prop", list(EVERY_PROPERTY))
def test_every_propertys_repro_reproduces(prop: str, tmp_path: Path) -> None:
    """The repro runs the harness's own procedure and checks: a planted bug of each property
    fails in it with exit 1 and "the failure reproduces" (a hang ends with the rank watchdog)."""
    name, finding, misuse = planted_finding(prop)
    path = repro.write(finding, f"{BUGS}:{name}", tmp_path, timeout_s=3, misuse=misuse)
    done = run_script(path, sys.executable, cwd=ROOT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "repro: the failure reproduces" in done.stdout, done.stdout
    refused = prop == "inputs-untouched (in place)" and IN_PLACE_REFUSED  # torch 2.4-2.5 raise in the forward
    shown = "misuse" if misuse else "values" if prop == "history-dependent" or refused else finding.property
    assert f"[{shown}]" in done.stdout or (prop == "history-dependent" and "[shape]" in done.stdout), done.stdout


def test_a_history_dependent_repro_passes_without_its_history(tmp_path: Path) -> None:
    finding = Finding("shape", "mismatch", ONE, "(planted)", [])
    path = repro.write(finding, f"{BUGS}:caches_sizes", tmp_path)
    done = run_script(path, sys.executable, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not reproduced" in done.stdout


# -- the minimal repro: short, torch only, and it reproduces too --------------------------------

#: Runs each script given as if by ``python SCRIPT`` and prints every exit status: torch is
#: imported once for all of them (each forks its own ranks from this process).
RUN_EACH = """
import runpy, sys
statuses = {}
for path in sys.argv[1:]:
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as done:
        statuses[path] = done.code
print("STATUSES", repr(statuses))
"""
#: Cases the planted bugs above do not cover: an autograd.Function whose backward breaks only
#: when ranks' cotangent layouts differ (lightning-bolts' ``SyncFunction``: ``grad_output.clone()``
#: keeps a transposed layout), and a gather given subgroups (idle ranks, group= passed).
MIXED = Case(ranks=(RankSpec((1, 2)), RankSpec((1, 2), cotangent_layout="transposed")), grad="sum")
GROUPS = Case(ranks=(RankSpec((0,)), RankSpec((0,)), RankSpec((1,))), grad="sum", output="list", groups=((0,), (1,)))
GROUPS_RIGHT = dataclasses.replace(GROUPS, ranks=(RankSpec((1,)), RankSpec((2,)), RankSpec((1,))), output="tensor",
                                   groups=((0, 1),))


def minimal_scripts(tmp_path: Path) -> dict[str, tuple[Path, int]]:
    """Every minimal script to run, with the exit status it must have: each property's planted bug
    (1), the same finding against a correct gather (0), and the cases above."""
    scripts: dict[str, tuple[Path, int]] = {}

    def add(label: str, target: str, finding: Finding, status: int, misuse: bool = False) -> None:
        faithful = tmp_path / label.replace(" ", "_") / f"{finding.property}.py"
        faithful.parent.mkdir()
        path = minimal_repro.write(finding, target, faithful, timeout_s=10, misuse=misuse)  # 3 s was cut short by init on a loaded box
        scripts[label] = (path, status)

    for prop in EVERY_PROPERTY:
        name, finding, misuse = planted_finding(prop)
        add(prop, f"{BUGS}:{name}", finding, 1, misuse)
        add(f"{prop} correct", "tests.planted.faults:correct", finding, 0, misuse)
    sync = Call(name="SyncFunction.apply", positional=(), apply=True, signature="SyncFunction.apply(tensor)")
    add("layouts", "harness.variants.contrastive:SyncFunction",
        Finding("gradients", "mismatch", MIXED, "", [], call=sync), 1)
    by_group = Call(name="all_gather", positional=(), keywords=(("group", "group"),))
    add("groups", "torch.distributed.nn.functional:all_gather",
        Finding("gradients", "mismatch", GROUPS, "", [], call=by_group), 1)
    with_dim = Call(name="all_gather_ragged", keywords=(("group", "group"),))
    add("groups correct", "harness.ragged:all_gather_ragged",
        Finding("values", "mismatch", GROUPS_RIGHT, "", [], call=with_dim), 0)
    return scripts


def test_every_propertys_minimal_repro_reproduces_and_a_correct_gather_passes_it(tmp_path: Path) -> None:
    scripts = minimal_scripts(tmp_path)
    done = subprocess.run([sys.executable, "-c", RUN_EACH, *(str(path) for path, _ in scripts.values())], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")})
    statuses = ast.literal_eval(done.stdout.rpartition("STATUSES ")[2])
    got = {label: statuses.get(str(path)) for label, (path, _) in scripts.items()}
    assert got == {label: status for label, (_, status) in scripts.items()}, done.stdout[-6000:] + done.stderr[-3000:]
    assert done.stdout.count("it reproduces") == sum(status for _, status in scripts.values())
    # What a reader sees: expected against actual, for the element that differs.
    assert "rank 1: output[0] = 101.0, expected 1.0 (2 of 2 elements differ)" in done.stdout  # values
    assert "rank 1: grad[0] = 2.0, expected -2.0" in done.stdout  # gradients
    assert "rank 0: grad[0, 1] = 3.0, expected 5.0" in done.stdout  # mixed cotangent layouts
    assert (REFUSED if IN_PLACE_REFUSED else "the call wrote into x in place (x._version 0 -> 1) though its values "
            "are unchanged") in done.stdout
    lengths = {label: harness_lines(path.read_text()) for label, (path, _) in scripts.items()}
    assert max(lengths.values()) <= 80, lengths


def harness_lines(script: str) -> int:
    """How many lines of a minimal repro the harness wrote: less the target's inlined source (the
    user's code, as long as it is)."""
    inlined = next((node for node in ast.parse(script).body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", "") == "TARGET_SOURCE" for t in node.targets)), None)
    total = len(script.splitlines())
    return total if inlined is None else total - (inlined.end_lineno or inlined.lineno) + inlined.lineno - 1


def test_the_minimal_repro_needs_only_torch_and_runs_under_torchrun(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    sync = Call(name="SyncFunction.apply", positional=(), apply=True)
    finding = Finding("gradients", "mismatch", MIXED, "", [], call=sync)
    path = minimal_repro.write(finding, "harness.variants.contrastive:SyncFunction", tmp_path / "gradients.py",
                               timeout_s=10, misuse=False)
    imported = {name for node in ast.walk(ast.parse(path.read_text())) for name in (
        [alias.name for alias in node.names] if isinstance(node, ast.Import) else
        [node.module or ""] if isinstance(node, ast.ImportFrom) else [])}
    assert imported == {"faulthandler", "multiprocessing", "os", "socket", "sys", "torch", "torch.distributed",
                        "harness.variants.contrastive"}  # the last: the target itself
    torchrun = Path(sys.executable).with_name("torchrun")
    done = run_script(path, str(torchrun), "--standalone", "--nproc-per-node", "2", cwd=ROOT, environ=subprocess_env)
    assert done.returncode != 0, done.stdout + done.stderr
    assert "rank 0: grad[0, 1] = 3.0, expected 5.0" in done.stdout, done.stdout


# -- a minimal repro you can paste: the target's own code inlined, never an absolute path -------------

DOUBLING = '''"""A user's gather that doubles what it should copy."""
import torch
import torch.distributed as dist
{extra}

def gather(x, dim):
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    return {result}


if __name__ == "__main__":
    raise SystemExit("the module's main block ran")
'''
WRONG = Finding("values", "mismatch", Case(ranks=(RankSpec((2,), values="normal"),)), "(planted)", [])


def write_minimal(project: Path, target: str) -> Path:
    faithful = project / ".gather-harness" / "repros" / "user" / "values.py"
    faithful.parent.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(project)  # as the harness writes it: from the user's project directory
    try:
        return minimal_repro.write(WRONG, target, faithful, timeout_s=10, misuse=False)
    finally:
        os.chdir(cwd)


@pytest.mark.slow
def test_a_minimal_repro_runs_after_the_targets_file_is_gone(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "mine.py").write_text(DOUBLING.format(extra="", result="torch.cat(pieces, dim) * 2"))
    path = write_minimal(project, "mine.py:gather")
    (project / "mine.py").unlink()
    text = path.read_text()
    assert str(tmp_path) not in text and "def gather(x, dim):" in text  # the user's code, no absolute path
    done = run_script(path, sys.executable, cwd=tmp_path)
    assert done.returncode == 1 and "it reproduces" in done.stdout, done.stdout + done.stderr
    assert "main block ran" not in done.stdout + done.stderr


@pytest.mark.slow
def test_a_target_that_imports_its_sibling_is_loaded_by_a_relative_path_from_anywhere(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "helpers.py").write_text("def doubled(t):\n    return t * 2\n")
    (project / "mine.py").write_text(DOUBLING.format(extra="from helpers import doubled",
                                                     result="doubled(torch.cat(pieces, dim))"))
    path = write_minimal(project, "mine.py:gather")
    text = path.read_text()
    assert str(tmp_path) not in text and "imports its own helpers" in text and "TARGET_SOURCE" not in text
    for cwd in (project, tmp_path):  # from the project, and from elsewhere: found beside the script
        done = run_script(path, sys.executable, cwd=cwd)
        assert done.returncode == 1 and "it reproduces" in done.stdout, done.stdout + done.stderr
    (project / "mine.py").unlink()
    done = run_script(path, sys.executable, cwd=tmp_path)
    assert done.returncode != 0 and "this repro needs the target file mine.py" in done.stderr, done.stderr


def test_installed_code_is_imported_by_name() -> None:
    from harness.report.target_source import import_lines

    assert import_lines("torch.distributed.nn.functional:all_gather", Path("."))[1] == [
        "from torch.distributed.nn.functional import all_gather as target"]
    assert import_lines("harness.ragged:all_gather_ragged", Path("."))[1] == [
        "from harness.ragged import all_gather_ragged as target"]
