"""``python -m harness report`` on a small subset of the catalogue, with tiny budgets.

Which verdict each variant deserves is asserted elsewhere; here only the report's shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.frontends import catalogue_report
from harness.frontends import commands as cli
from harness.pool.pool import LocalPool
from harness.report.catalogue_table import HEADER, TEXT_HEADER, WIDTH
from tests.budgets import COMMAND_TIMEOUT_S

pytestmark = pytest.mark.slow  # the report command in a subprocess


def test_markdown_and_json_for_two_variants(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "report", "--variants", "ours_sum,pad_unpad_by_value", "--max-examples", "5",
         "--probe-misuse", "--markdown", "--json", "report.json"],
        cwd=tmp_path, env={**env, "GATHER_HARNESS_PROFILE": "ci"}, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "| " + " | ".join(HEADER) + " |"
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines[2:4]}
    assert set(rows) == {"ours_sum", "pad_unpad_by_value"}
    assert rows["ours_sum"][1] == "ragged dim any, grad sum" and rows["ours_sum"][2] in ("pass", "fail")
    assert "int16" in done.stdout and "all_gather_into_tensor" in done.stdout  # the capability matrix
    assert "[1/2] ours_sum: " in done.stderr and "[2/2] pad_unpad_by_value: " in done.stderr
    document = json.loads((tmp_path / "report.json").read_text())
    assert [v["name"] for v in document["variants"]] == ["ours_sum", "pad_unpad_by_value"]
    for variant in document["variants"]:
        assert {"target", "verdict", "examples", "elapsed_s", "violations", "de_facto_gradient", "misuse"} <= set(variant)
    assert document["capabilities"]["cells"]["int16"]["all_gather"] != "ok"


def test_text_table_without_misuse_probes_by_default(pool: LocalPool, capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["report", "--variants", "plain_all_gather", "--max-examples", "5", "--quiet"])
    out, err = capsys.readouterr()
    assert status == 0 and err == ""
    intro, command, table = out.split("\n\n")[:3]
    assert "what its authors claim" in " ".join(intro.split()) and command.strip().startswith("python -m harness check ")
    header, rule, row = table.splitlines()[:3]
    assert header.split() == [word for column in HEADER if column != "misuse"
                              for word in TEXT_HEADER.get(column, column).split()]
    assert set(rule) <= {"-", " "}
    assert row.startswith("plain_all_gather") and "equal dim any, grad none" in row
    assert max(len(line) for line in out.splitlines()) <= WIDTH


def test_unknown_variant_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--variants", "ours_sum,nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --variants: unknown variant 'nope'; known variants: ") and err.count("\n") == 1


def test_world_sizes_given_are_every_variants(pool: LocalPool, tmp_path: Path) -> None:
    """``--world-sizes`` replaces each variant's own range: every case of the JSON is at W=2."""
    path = tmp_path / "report.json"
    assert cli.main(["report", "--variants", "ours_local", "--world-sizes", "2", "--max-examples", "4", "--quiet",
                     "--json", str(path)]) == 0
    [variant] = json.loads(path.read_text())["variants"]
    assert variant["verdict"] == "pass" and set(variant["coverage"]["axes"]["W"]) == {"2"}


@pytest.mark.parametrize("argv, message", [
    (["--backend", "nccl"], "--backend nccl: nccl moves CUDA tensors only"),
    (["--device", "cuda"], "--device cuda: no CUDA device is visible"),
])
def test_a_backend_or_device_this_machine_lacks_is_a_usage_error(argv: list[str], message: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    if "--device" in argv and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert cli.main(["report", "--variants", "ours_sum", *argv]) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")


def test_a_worker_that_ends_first_leaves_the_others_forkserver_running(tmp_path: Path) -> None:
    """Two workers: the one with the two quick rows ends first while the other still starts ranks
    (the all-to-all's crashes take fresh sets).  Each worker's forkserver is its own, its socket too:
    the first one's end removes only its own (it removed the driver's, which the other's server
    listened in: 'not checked: FileNotFoundError')."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "report", "--variants", "a2a_nn_all_to_all,ours_sum,ours_local", "--quiet"],
        cwd=tmp_path, env={**env, catalogue_report.JOBS_ENV: "2"}, capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    rows = {words[0]: words for words in map(str.split, done.stdout.splitlines())
            if words[:1] in (["ours_sum"], ["ours_local"], ["a2a_nn_all_to_all"])}
    assert ": not checked: " not in done.stderr, done.stderr
    assert ["pass" in rows["ours_sum"], "pass" in rows["ours_local"], "fail" in rows["a2a_nn_all_to_all"]] == [True] * 3
    assert done.returncode == 0, done.stdout + done.stderr
