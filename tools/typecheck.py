"""Type-check the installed package layout with mypy: ``python tools/typecheck.py``.

The repository keeps ``strategies/`` and ``reference/`` at the top level and installs them
as ``harness.strategies`` and ``harness.reference`` (``pyproject.toml``'s ``package-dir``).
mypy names modules after directories and cannot follow that mapping (nor an editable
install's import hook), so this script stages the installed layout as symbolic links in a
temporary directory -- ``harness/*`` plus ``harness/strategies -> strategies`` and
``harness/reference -> reference`` -- runs mypy on package ``harness`` there, and prints
its report with the repository's own paths.  Exit status: mypy's.

``tox -e lint`` and the test suite (``tests/test_house.py``) both run this script.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where each folder of the repository lands in the installed package.
MAPPED = {"harness": "harness", "strategies": "harness/strategies", "reference": "harness/reference"}


def stage(into: Path) -> None:
    """Link every entry of ``harness/`` and the mapped top-level folders into ``into/harness``."""
    package = into / "harness"
    package.mkdir()
    for entry in (ROOT / "harness").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for folder, installed in MAPPED.items():
        if folder != "harness":
            (into / installed).symlink_to(ROOT / folder)


def repository_paths(report: str) -> str:
    """mypy's paths in the staging tree (``harness/strategies/x.py``) as repository paths."""
    for folder, installed in sorted(MAPPED.items(), key=lambda item: -len(item[1])):
        report = report.replace(installed + "/", folder + "/")
    return report


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gather-harness-mypy-") as staging:
        stage(Path(staging))
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
             "--cache-dir", os.path.join(staging, ".mypy_cache"), "-p", "harness"],
            cwd=staging, capture_output=True, text=True,
        )
    print(repository_paths(done.stdout + done.stderr), end="")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
