"""A torch path the installed release lacks is reported ``unavailable``, and takes down no other row.

Each catalogue entry names the torch names its code calls that older supported releases lack
(``VariantSpec.needs``, with the first release that has them, measured).  These tests take a
needed name away from the installed torch (``monkeypatch.delattr``, undone afterwards) and
check what a user on a release without it sees: the rows that need it say ``unavailable:
needs torch >= X.Y`` without being run, every other row still loads, and ``report`` and
``fuzz`` carry on.  On the floor torch (2.4) the same happens for real (``tox -e torch-floor``).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from harness.frontends.commands import main
from harness.ranks.targets import load
from harness.settings import profiles
from harness.variants import CATALOGUE
from harness.variants.specs import DTENSOR, Need

#: In a fixed order (module, then names): every pytest-xdist worker must collect the same list,
#: and a set of needs iterates in an order that changes with each process's string hashing.
NEEDS: list[Need] = sorted({need for spec in CATALOGUE for need in spec.needs},
                           key=lambda need: (need.module, tuple(need.names)))
NEEDED_NAMES = [(need, name) for need in NEEDS for name in need.names]


def take_away(monkeypatch: pytest.MonkeyPatch, need: Need, name: str) -> None:
    """The installed torch, as a release without ``need.module``'s ``name`` would be (an older
    release that really lacks it stays as it is)."""
    monkeypatch.delattr(importlib.import_module(need.module), name, raising=False)


@pytest.mark.parametrize("need, name", NEEDED_NAMES, ids=[f"{n.module}.{name}" for n, name in NEEDED_NAMES])
def test_a_missing_name_makes_only_its_rows_unavailable(monkeypatch: pytest.MonkeyPatch, need: Need,
                                                        name: str) -> None:
    before = {spec.name: spec.unavailable() for spec in CATALOGUE}
    take_away(monkeypatch, need, name)
    for spec in CATALOGUE:
        reason = spec.unavailable()
        if need in spec.needs:
            assert reason.startswith(f"needs torch >= {need.since} (this torch has no {need.module}."), spec.name
        else:
            assert reason == before[spec.name], spec.name
            assert callable(load(spec.target, fresh=True)), spec.name  # its module imports without the name


def test_report_says_unavailable_and_checks_the_rest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    take_away(monkeypatch, DTENSOR, "DTensor")
    json_path = tmp_path / "report.json"
    status = main(["report", "--variants", "dtensor_redistribute,plain_all_gather", "--max-examples", "3",
                   "--json", str(json_path)])
    out, err = capsys.readouterr()
    assert status == 0, out + err
    reason = f"needs torch >= {DTENSOR.since} (this torch has no torch.distributed.tensor.DTensor)"
    assert f"[1/2] dtensor_redistribute: unavailable: {reason}" in err
    row = next(line for line in out.splitlines() if line.startswith("dtensor_redistribute"))
    assert row.split()[6] == "unavailable" and reason in out, row  # a long cell is a numbered note
    variants = {v["name"]: v for v in json.loads(json_path.read_text())["variants"]}
    assert (variants["dtensor_redistribute"]["verdict"], variants["dtensor_redistribute"]["unavailable"]) == (
        "unavailable", reason)
    assert variants["plain_all_gather"]["verdict"] == "pass"
    assert "checked 1 variant(s) (1 unavailable on torch " in out


def test_fuzz_leaves_an_unavailable_variant_out_of_the_rotation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    take_away(monkeypatch, DTENSOR, "DTensor")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(profiles.DATABASE_ENV, str(tmp_path / "db"))
    status = main(["fuzz", "--variants", "dtensor_full_tensor", "--duration", "5s", "--json", "fuzz.json", "--quiet"])
    assert status == 0, capsys.readouterr()
    [entry] = json.loads((tmp_path / "fuzz.json").read_text())["targets"]
    assert (entry["status"], entry["examples"]) == ("unavailable", 0)
    assert entry["error"].startswith(f"needs torch >= {DTENSOR.since} "), entry
