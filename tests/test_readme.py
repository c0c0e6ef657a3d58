"""The README runs as printed: every ``bash`` block but the two set-up commands.

Each block runs with ``bash`` in a scratch directory holding a copy of ``examples/`` (and
nothing else of the repository) and every ``python`` block whose first line names a file
(``# test_gathers.py``), written there under that name, with this environment's ``python``
and ``torchrun`` first on ``PATH``.  The case notation the README explains is the one
``python -m harness explain-case`` prints.  A command line may end with ``# exit N`` to state the exit status it must have;
every other command must exit 0.  The two set-up commands create a virtual environment and
install the project: ``.ci/run`` runs the second of them on every CI run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import notation

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_FILE_BLOCK = re.compile(r"```python\n# ([\w.]+\.py)\n(.*?)```", re.DOTALL)
_EXPECTED = re.compile(r"\s*#\s*exit (\d+)\s*$")
#: The whole budget of a block: a check starts in seconds; the scale-out block starts ten ranks.
BLOCK_TIMEOUT_S = 240


def bash_blocks() -> list[str]:
    return [block for block in _BLOCK.findall((ROOT / "README.md").read_text()) if "-m venv" not in block]


def checked_script(block: str) -> str:
    """``block`` as a script in which every command's exit status is checked.

    Continuation lines are joined; ``cmd  # exit N`` must exit N, any other command 0;
    ``cmd &`` is left to its ``wait``.
    """
    lines = ["set -u"]
    for number, command in enumerate(block.replace("\\\n", " ").splitlines(), 1):
        if not command.strip():
            continue
        expected = _EXPECTED.search(command)
        command = _EXPECTED.sub("", command) if expected else command
        if command.rstrip().endswith("&"):
            lines.append(command)
            continue
        want = int(expected.group(1)) if expected else 0
        lines.append(f"{command}\nstatus=$?; if [ $status -ne {want} ]; then "
                     f"echo 'README line {number} exited '$status', not {want}' >&2; exit 99; fi")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("block", bash_blocks(), ids=lambda block: block.strip().splitlines()[0][:60])
def test_the_readme_block_runs_as_printed(block: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for name, source in _FILE_BLOCK.findall((ROOT / "README.md").read_text()):
        (tmp_path / name).write_text(source)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("PYTEST_XDIST_WORKER", "GATHER_HARNESS_DIR", "GATHER_HARNESS_DATABASE"):
        env.pop(name, None)
    done = subprocess.run(["bash", "-c", checked_script(block)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=BLOCK_TIMEOUT_S)
    assert done.returncode == 0, f"{block}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"


def test_the_readme_has_the_blocks_this_test_promises() -> None:
    text = "\n".join(bash_blocks())
    for command in ("--help", "check examples/", "report --variants", "replay", "harness.remote"):
        assert command in text, command


def test_the_readme_explains_the_case_notation_the_command_prints() -> None:
    assert notation.TEXT in (ROOT / "README.md").read_text()
    assert _FILE_BLOCK.findall((ROOT / "README.md").read_text()), "the CI section's test file is gone"


def readme_catalogue_rows() -> list[tuple[str, str]]:
    """(variant, claimed) of each row of the README's catalogue tables (one per collective), in order."""
    text = (ROOT / "README.md").read_text()
    header = "| variant | claimed | verdict |"
    rows: list[tuple[str, str]] = []
    for start in (index for index in range(len(text)) if text.startswith(header, index)):
        table = text[start:].split("\n\n")[0].splitlines()[2:]
        rows += [(cells[1].strip(), cells[2].strip()) for cells in (row.split("|") for row in table)]
    return rows


def test_the_readme_catalogue_table_is_the_catalogue() -> None:
    """Every catalogue variant has its row, in catalogue order, claiming what the catalogue says
    (as ``report --markdown`` prints it); the README shows no variant the catalogue lacks."""
    from harness.catalogue_report import short_contract
    from harness.contract import COLLECTIVES
    from harness.variants import CATALOGUE

    printed = sorted(CATALOGUE, key=lambda spec: list(COLLECTIVES).index(spec.contract.collective))  # a section each
    assert readme_catalogue_rows() == [(spec.name, short_contract(spec.contract)) for spec in printed]
