"""Type-check the installed package layout with mypy: ``python tools/typecheck.py``.

The repository keeps ``strategies/`` and ``reference/`` at the top level and installs them
as ``harness.strategies`` and ``harness.reference`` (``pyproject.toml``'s ``package-dir``).
mypy names modules after directories and cannot follow that mapping (nor an editable
install's import hook), so this script stages the installed layout as symbolic links in a
temporary directory -- ``harness/*`` plus ``harness/strategies -> strategies`` and
``harness/reference -> reference`` -- runs mypy on package ``harness`` there, and prints
its report with the repository's own paths.  Exit status: mypy's.

mypy's cache is kept between runs in ``$XDG_CACHE_HOME/gather-harness/mypy`` (``~/.cache`` by
default, where ``.ci/run`` keeps its torch environment), shared by every checkout: mypy checks a
cached module by its source's hash, so a fresh clone, staged elsewhere, finds it warm.  A cold run
reads torch's stubs for about 11 s, a warm one takes under a second, and what changed is checked
again.  Runs take turns on a lock beside the cache.

``tox -e lint``, the pre-commit hook and the test suite (``tests/test_house.py``) run this script.
"""

from __future__ import annotations

import fcntl
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


def cache_dir() -> Path:
    """mypy's cache, under the user's cache directory."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gather-harness" / "mypy"


def main() -> int:
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "w") as lock, tempfile.TemporaryDirectory(prefix="gather-harness-mypy-") as staging:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one mypy writes the cache at a time
        stage(Path(staging))
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache),
             "-p", "harness"],
            cwd=staging, capture_output=True, text=True,
        )
    print(repository_paths(done.stdout + done.stderr), end="")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
