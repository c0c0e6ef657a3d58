"""The main job's wall time, and whether it prints the same table run after run, quiet and loaded.

Run from the repository root::

    python benchmarks/report.py                    # report twice on a quiet box, then twice beside 2 busy loops
    python benchmarks/report.py --runs 1 --busy 0  # one quiet run: its wall time
    python benchmarks/report.py --variants a,b     # a subset (the whole catalogue by default)

Each run is ``python -m harness report`` as a user types it (a fresh process: imports, the
rank forkserver and the capability measurement included).  Its stdout is compared with the first
run's after the one line that holds the elapsed time (``checked N variant(s) in T s``) is
taken out, in two parts: the report proper (the first paragraph, the tables and their notes,
the capability matrix: every byte must be equal) and the coverage summary after it (how many
cases ran, shrinking steps included: shown apart, as a machine slowed enough to call one
shrinking step's crash a hang may take a few steps more or less to the same minimal case).  ``--busy N`` runs the later half of the runs
beside N ``while True: pass`` processes (what ``yes > /dev/null`` does), the load a shared
machine adds; they are stopped when the run ends, however it ends.

Targets (issue 38): a run within 90 s on a quiet 2-core box; every run's table byte-identical
to the first, loaded or not.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import multiprocessing
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.report.text import markdown_table, text_table  # noqa: E402

TARGET_S = 90.0
_ELAPSED = re.compile(r"^checked \d+ variant\(s\).* in \d+ s$", re.MULTILINE)


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes that keep a core busy each, while the block runs."""
    loops = [multiprocessing.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(count)]
    for loop in loops:
        loop.start()
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.join()


def run_report(variants: str | None) -> tuple[float, int, str]:
    """One ``python -m harness report``: (wall seconds, exit status, stdout without its elapsed line)."""
    argv = [sys.executable, "-m", "harness", "report", *(["--variants", variants] if variants else [])]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    return time.monotonic() - started, done.returncode, _ELAPSED.sub("checked (elapsed taken out)", done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs in all (default 4: two quiet, two loaded)")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the later half of the runs (default 2)")
    parser.add_argument("--variants", help="a comma list of catalogue names (default: all)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="write each run's stdout (elapsed line taken out) to DIR/run-N.txt")
    args = parser.parse_args(argv)
    first = ""
    rows = []
    failed = False
    for run in range(args.runs):
        loaded = args.busy if run >= (args.runs + 1) // 2 else 0
        with busy_loops(loaded):
            wall, status, table = run_report(args.variants)
        first = first or table
        report, _, summary = table.partition("checked (elapsed taken out)")
        first_report, _, first_summary = first.partition("checked (elapsed taken out)")
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            with open(os.path.join(args.keep, f"run-{run + 1}.txt"), "w") as handle:
                handle.write(table)
        same = report == first_report
        if not same:
            sys.stderr.writelines(difflib.unified_diff(first_report.splitlines(True), report.splitlines(True),
                                                       "run 1", f"run {run + 1}"))
        meets = same and status == 0 and (loaded or wall <= TARGET_S)
        failed |= not meets
        rows.append([str(run + 1), f"{loaded} busy loops" if loaded else "quiet", f"{wall:.1f}", str(status),
                     "yes" if same else "NO", "yes" if summary == first_summary else "no",
                     "yes" if meets else "NO"])
    header = ["run", "load", "wall s", "exit", "report as run 1", "coverage summary as run 1",
              f"meets (<= {TARGET_S:g} s quiet, same report)"]
    print((markdown_table if args.markdown else text_table)(header, rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
