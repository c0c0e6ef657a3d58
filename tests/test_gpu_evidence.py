"""``tools/gpu_evidence.py``: its steps parse, its verdicts can fail, and a dry-run step runs here."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path

import pytest

from harness.frontends import commands as cli

pytestmark = pytest.mark.slow  # a dry-run step of tools/gpu_evidence.py (about 20 s)

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "gpu_evidence.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_evidence", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


evidence = _load()


@pytest.mark.parametrize("gpu", [True, False], ids=["cuda", "cpu"])
def test_every_step_has_its_own_name_and_every_harness_command_parses(gpu: bool) -> None:
    steps = evidence.steps(gpu, 60.0)
    assert len({step.name for step in steps}) == len(steps)
    parser = cli.build_parser()
    for step in steps:
        if step.argv[1:3] == ["-m", "harness"]:
            parser.parse_args(step.argv[3:])  # an unknown option would exit 2 here, not on the GPU
    assert any("nccl" in step.name for step in steps) == gpu


def test_a_step_is_ok_only_with_the_wanted_status_and_what_it_must_say() -> None:
    step = evidence.Step("hang", "lane", ["true"], 1.0, want=(1,), must_say=r"\(hang\)")
    assert evidence.Result(step, 1, 0.0, "property violated: no-hang-no-crash (hang)").ok
    assert not evidence.Result(step, 0, 0.0, "property violated: no-hang-no-crash (hang)").ok
    assert not evidence.Result(step, 1, 0.0, "property violated: values (exception)").ok
    assert not evidence.Result(step, None, 0.0, "(hang)").ok  # killed at its timeout


def test_a_dry_run_step_writes_only_under_its_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert evidence.main(["--device", "cpu", "--out", str(out), "--only", "check-ours-gloo-cpu-w1"]) == 0
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("[ok] check-ours-gloo-cpu-w1") and "PASS: no counterexample in 40 examples" in summary
    log = (out / "check-ours-gloo-cpu-w1.log").read_text()
    assert shlex.split(log.splitlines()[0])[-2:] == ["--json", "check-single.json"]  # its command line heads it
    assert (out / "work" / "check-single.json").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    assert "1 of 1 steps ok" in capsys.readouterr().out
