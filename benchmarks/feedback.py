"""Fast feedback (issue 52) in one run: the suite, the fast loop, ``check`` at W=2 and the main job,
with the fuzz rates beside them, each against its target.

Run from the repository root::

    python benchmarks/feedback.py               # everything, one after another (about 15 minutes on 2 cores)
    python benchmarks/feedback.py --no-suite    # all but the whole suite (about 3 minutes)
    python benchmarks/feedback.py --markdown

Measured one after another on one box, so that no two of them share its cores:

- **suite**: ``pytest -n auto`` with ``CI=true``, the README's test command, in this checkout (a
  fresh clone adds its virtual environment's set-up, not test time); wall seconds and pytest's counts;
- **fast loop**: ``pytest -n auto -m "not slow"``, the inner loop ``tests/README.md`` describes;
- **check** and **fuzz**: :func:`benchmarks.cost_model.model` on the cheap gather (``all_gather_single``
  of equal shapes) at W=1 and W=2: examples per second as ``check`` runs them (strata and
  Hypothesis's draws in batches) and as ``fuzz`` does, and ``check``'s time per example over a raw call's;
- **main job**: ``python -m harness report`` as a user types it (:func:`benchmarks.report.run_report`).

A script, not a test: the box is shared, so a time is this run's, and the table says when it ran.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script only benchmarks/ is on the path; ranks inherit the driver's

from benchmarks import cost_model, report  # noqa: E402
from benchmarks.throughput import verdict  # noqa: E402
from harness.pool.pool import shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402

#: Issue 52's targets: the suite and the fast loop on 2 cores, the main job, in seconds.
TARGET_SUITE_S = 480.0
TARGET_FAST_LOOP_S = 90.0
TARGET_REPORT_S = 60.0
#: Cases per world size for the cost model: its ``--quick`` count.
MODEL_CASES = 60
_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def run_pytest(*args: str) -> tuple[float, int, str]:
    """``pytest -n auto`` with ``CI=true`` in this checkout: (wall seconds, exit status, pytest's counts)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "GATHER_HARNESS_"))}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "auto", "-q", *args], cwd=ROOT,
                          env={**env, "CI": "true"}, capture_output=True, text=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = ", ".join(f"{number} {word}" for number, word in _COUNTS.findall(summary)) or summary or done.stderr[-300:]
    return time.monotonic() - started, done.returncode, counts


def timed_row(name: str, seconds: float, status: int, detail: str, target: float) -> tuple[str, ...]:
    met = status == 0 and seconds <= target
    why = f"{seconds - target:.0f} s" if status == 0 else f"exit {status}"
    return name, f"{seconds:.0f} s", detail, f"<= {target:.0f} s", verdict(met, why)


def rate_rows() -> list[tuple[str, ...]]:
    """``check`` at W=2 and ``fuzz`` at W=1 and W=2, from one pool, as ``cost_model`` measures them."""
    pool = shared_pool()
    rows = []
    for world in (1, 2):
        row = cost_model.model(pool, world, MODEL_CASES, "equal")
        check, fuzz, ratio = 1 / row["search"], 1 / row["fuzz"], row["search"] / row["raw"]
        if world == 2:
            target = cost_model.TARGET_CHECK_W2
            rows.append(("check at W=2", f"{check:.0f} examples/s", "the cheap gather", f">= {target:.0f}/s",
                         verdict(check >= target, f"{target - check:.0f}/s")))
            limit = cost_model.TARGET_CHECK_RAW_W2
            rows.append(("check at W=2 over a raw call", f"{ratio:.1f}x", f"raw call {row['raw'] * 1000:.2f} ms",
                         f"<= {limit:g}x", verdict(ratio <= limit, f"{ratio / limit:.1f}x")))
        target = cost_model.TARGET_FUZZ[world]
        rows.append((f"fuzz at W={world}", f"{fuzz:.0f} examples/s", "the cheap gather (no loss)", f">= {target:.0f}/s",
                     verdict(fuzz >= target, f"{target - fuzz:.0f}/s")))
    pool.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-suite", action="store_true", help="leave out the whole suite (the longest part)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M")
    rows = []
    if not args.no_suite:
        rows.append(timed_row("suite (pytest -n auto, CI=true)", *run_pytest(), TARGET_SUITE_S))
    rows.append(timed_row('fast loop (-m "not slow")', *run_pytest("-m", "not slow"), TARGET_FAST_LOOP_S))
    rows += rate_rows()
    seconds, status, _ = report.run_report(None)
    rows.append(timed_row("main job (python -m harness report)", seconds, status, "the whole catalogue", TARGET_REPORT_S))
    print(f"gather-harness fast feedback ({started}; {os.cpu_count()} cores; load average at the end "
          f"{os.getloadavg()[0]:.1f}; one run: each time is this box's, one after another)")
    header = ("measurement", "value", "of", "target", "verdict")
    print((markdown_table if args.markdown else text_table)(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
