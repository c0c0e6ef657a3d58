"""``python -m harness fuzz`` and ``replay``: budgets, the summary, exit statuses, replays.

Runs are a few seconds each; the ones that need a process of their own (exit status,
SIGTERM) are subprocesses, the rest call the CLI in this process on the shared warm pool.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.core.case import Case, RankSpec
from harness.frontends.commands import main
from harness.settings import profiles
from harness.settings.options import parse_duration

ROOT = Path(__file__).resolve().parent.parent
CORRECT = "harness.ragged:gather_sum"


def fuzz_command(tmp_path: Path, *args: str) -> list[str]:
    """A fuzz run writing everything under ``tmp_path``; ``-X faulthandler`` so that SIGABRT shows
    where a run that outstays its welcome is stuck."""
    return [sys.executable, "-X", "faulthandler", "-m", "harness", "fuzz", *args, "--database", str(tmp_path / "db"),
            "--json", str(tmp_path / "fuzz.json"), "--repro-dir", str(tmp_path / "repros"), "--timeout", "3", "--quiet"]


def read_summary(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in-process commands in ``tmp_path`` with a database there, restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(profiles.DATABASE_ENV, str(tmp_path / "db"))
    return tmp_path


@pytest.mark.slow
def test_fuzz_finds_a_planted_bug_and_the_finding_replays(tmp_path: Path, isolated: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    """The run ends once its only target has a finding (exit 1); replay runs that case again."""
    result = subprocess.run(fuzz_command(tmp_path, "tests.planted.bugs:reversed_ranks", "--duration", "1m"),
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    summary = read_summary(tmp_path / "fuzz.json")
    assert (summary["status"], summary["verdict"], summary["found"]) == ("finished", "fail", 1)
    assert summary["elapsed_s"] < 60 and summary["targets"][0]["status"] == "fail"
    [finding] = summary["findings"]
    assert finding["property"] == "values" and Path(finding["repro"]).is_file(), finding
    assert Case.from_dict(finding["case"]).world_size == 2  # shrunk
    assert "FOUND 1 finding(s)" in result.stdout and f"replay {tmp_path / 'fuzz.json'} --index 0" in result.stdout
    assert f"called as: {finding['call']['made']}" in result.stdout  # the call check prints, not a default

    assert main(["replay", str(tmp_path / "fuzz.json"), "--index", "0"]) == 1
    assert "reversed_ranks (values): reproduced" in capsys.readouterr().out


@pytest.mark.slow
def test_fuzz_over_two_catalogue_variants_finds_nothing(isolated: Path, capsys: pytest.CaptureFixture) -> None:
    """Both variants get turns within the budget; nothing found is exit 0 and a passing summary."""
    assert main(["fuzz", "--variants", "ours_sum,ours_local", "--duration", "4", "--world-sizes", "1-3",
                 "--quiet"]) == 0
    summary = read_summary(isolated / ".gather-harness" / "fuzz.json")
    assert (summary["status"], summary["verdict"], summary["findings"]) == ("finished", "pass", [])
    assert [(t["name"], t["status"]) for t in summary["targets"]] == [("ours_sum", "pass"), ("ours_local", "pass")]
    assert all(t["examples"] > 0 for t in summary["targets"]), summary["targets"]
    assert summary["database"] == str(isolated / "db") and summary["world_sizes"] == [1, 3]
    assert "NOTHING FOUND" in capsys.readouterr().out


@pytest.mark.slow
def test_sigterm_mid_run_leaves_a_valid_summary_and_no_ranks(tmp_path: Path) -> None:
    summary_path = tmp_path / "fuzz.json"
    fuzz = subprocess.Popen(fuzz_command(tmp_path, CORRECT, "--duration", "2m", "--save-every", "0.5",
                                         "--world-sizes", "2"),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = _examples_seen(summary_path, fuzz, count=2)
        assert seen[0] < seen[1], "the summary is not rewritten while the run goes on"
        ranks = _descendants(fuzz.pid)
        assert ranks, "no rank processes found under the fuzz process"
        fuzz.send_signal(signal.SIGTERM)
        try:
            fuzz.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            fuzz.send_signal(signal.SIGABRT)  # its stacks, for the failure report
            print(fuzz.communicate(timeout=30)[1][-8000:])
            raise
    finally:
        if fuzz.poll() is None:
            fuzz.kill()
            fuzz.wait()
    assert fuzz.returncode == 130
    summary = read_summary(summary_path)
    assert summary["status"] == "interrupted" and summary["examples"] >= seen[1]
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in ranks if Path(f"/proc/{pid}").exists()]


def _examples_seen(path: Path, process: subprocess.Popen, count: int, timeout: float = 60.0) -> list[int]:
    """The example counts of the first ``count`` different running summaries."""
    seen: list[int] = []
    deadline = time.monotonic() + timeout
    while len(seen) < count and time.monotonic() < deadline and process.poll() is None:
        if path.exists():
            summary = read_summary(path)  # written atomically: never half a file
            if summary["status"] == "running" and summary["examples"] and summary["examples"] not in seen:
                seen.append(summary["examples"])
        time.sleep(0.1)
    assert len(seen) == count, f"saw {seen} before the run ended (exit {process.poll()})"
    return seen


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_a_replay_makes_the_call_the_finding_made(isolated: Path, capsys: pytest.CaptureFixture) -> None:
    """The finding's ``call`` (here ``.apply`` with the world group) is the replay's call, not ``f(x, dim)``."""
    from harness.core.binding import plan_call
    from tests.planted import conventions as planted_conventions

    case = Case(ranks=(RankSpec((2,)), RankSpec((2,))), grad="sum", output="stack", world_group=True)
    findings = [{"index": n, "name": name, "target": f"tests.planted.conventions:{name}", "property": "gradients",
                 "case": case.to_dict(), "call": plan_call(getattr(planted_conventions, name)).to_dict()}
                for n, name in enumerate(("AllGatherGrad", "AllGatherGradFixed"))]
    (isolated / "lightning.json").write_text(json.dumps({"findings": findings}))

    assert main(["replay", str(isolated / "lightning.json"), "--index", "0"]) == 1
    assert "incorrect number of gradients (expected 2, got 1)" in capsys.readouterr().out
    assert main(["replay", str(isolated / "lightning.json"), "--index", "1"]) == 0
    assert "AllGatherGradFixed (gradients): did not reproduce" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the hint given on a machine without CUDA")
def test_a_cuda_finding_replays_on_cpu_when_asked(isolated: Path, capsys: pytest.CaptureFixture) -> None:
    case = Case(ranks=(RankSpec((1,)), RankSpec((1,))), backend="nccl", device="cuda")
    finding = {"index": 0, "name": "reversed_ranks", "target": "tests.planted.bugs:reversed_ranks",
               "property": "values", "case": case.to_dict(), "out_of_contract": False}
    (isolated / "gpu.json").write_text(json.dumps({"findings": [finding]}))

    assert main(["replay", str(isolated / "gpu.json")]) == 2
    assert "add --on-cpu" in capsys.readouterr().err
    assert main(["replay", str(isolated / "gpu.json"), "--on-cpu"]) == 1
    assert "reversed_ranks (values): reproduced" in capsys.readouterr().out


def test_a_replay_says_reproduced_only_for_the_findings_own_property(isolated: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """A case that fails another property is a failure (exit 1) but not this finding, and a target
    this machine cannot import is a usage error: before, both came back as "reproduced" (a CUDA
    finding replayed on a machine without the target's module)."""
    case = Case(ranks=(RankSpec((1,)), RankSpec((1,))))
    finding = {"index": 0, "name": "reversed_ranks", "target": "tests.planted.bugs:reversed_ranks",
               "property": "dtype", "case": case.to_dict(), "out_of_contract": False}
    (isolated / "other.json").write_text(json.dumps({"findings": [finding]}))
    assert main(["replay", str(isolated / "other.json")]) == 1
    assert "(dtype): not reproduced as dtype: the case failed values instead" in capsys.readouterr().out

    (isolated / "gone.json").write_text(json.dumps({"findings": [{**finding, "target": "no_such_module:f"}]}))
    assert main(["replay", str(isolated / "gone.json")]) == 2
    assert "target module 'no_such_module' cannot be found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fuzz", "--grad", "sum"], "--grad describes a TARGET"),
        (["fuzz", "--kwarg", "sync_grads=True"], "--kwarg describes a TARGET"),
        (["fuzz", CORRECT, "--kwarg", "sync_grads=Tru"], "'Tru' is not a Python literal"),
        (["fuzz", "--variants", "nope"], "unknown variant 'nope'"),
        (["fuzz", CORRECT, "--variants", "ours_sum"], "leave it out when fuzzing a TARGET"),
        (["fuzz", "--duration", "5x"], "is not a positive duration"),
        (["fuzz", "--json", "no/such/dir/fuzz.json"], "does not exist"),
        (["replay", "missing.json"], "not a readable fuzz summary"),
    ],
    ids=["contract option without TARGET", "fixed argument without TARGET", "bad fixed argument", "unknown variant", "TARGET and --variants", "bad duration",
         "summary in a missing directory", "missing summary"],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], message: str, isolated: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


@pytest.mark.parametrize("text, seconds", [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("1h", 3600.0),
                                           ("1.5m", 90.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_no_summary_is_left_by_a_usage_error(isolated: Path) -> None:
    assert main(["fuzz", "no.such.module:gather", "--duration", "5", "--quiet"]) == 2
    assert not (isolated / ".gather-harness").exists()
