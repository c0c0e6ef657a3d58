"""Correct gathers checked on a machine with more work than cores: spurious findings, hang watch off and on.

Run from the repository root::

    python benchmarks/overload.py              # 2 x 6 checks of 2 correct targets, 4 busy loops
    python benchmarks/overload.py --checks 2   # a quick look

CI runs the suite on two cores beside other jobs; a case that takes milliseconds can then miss
a timeout of seconds.  Here busy loops (``--busy``, at normal priority) take the cores while the
harness runs at lower priority, and the timeout is short (``--timeout``, 0.05 s) so that a short
run shows what CI meets rarely: a correct target "hanging".  Both arms run the same checks (same
seeds) of correct targets (:data:`TARGETS`), so every finding is spurious:

- **watch off**: the rule before the hang watch, the timeout is the whole wait
  (``Watch.more_time`` replaced by "no more time");
- **watch on**: ranks still busy at the timeout get more time (:class:`harness.pool.watch.Watch`).

A hang no replay brings back is put aside with a warning either way ("unattributed", not a
failure); a finding fails the check.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.core.contract import Contract  # noqa: E402
from harness.pool import watch  # noqa: E402
from harness.pool.pool import LocalPool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.engine import run_check  # noqa: E402

TARGETS = (
    ("harness.ragged:reduce_scatter_sum", Contract(collective="reduce-scatter", grad="adjoint", groups=True)),
    ("harness.ragged:all_gather_ragged", Contract(grad="sum", groups=True)),
)
HEADER = ("hang watch", "checks", "examples", "spurious findings", "hangs put aside (warned)", "seconds")


def run_arm(pool: LocalPool, checks: int, examples: int, timeout: float) -> tuple[int, int, int, int, float]:
    """``checks`` rounds of every target: (checks, examples, findings, put aside, seconds)."""
    started = time.monotonic()
    done = run = found = aside = 0
    for seed in range(checks):
        for target, contract in TARGETS:
            report = run_check(target, contract, max_examples=examples, timeout_s=timeout, pool=pool, seed=seed)
            done, run = done + 1, run + report.examples
            found, aside = found + len(report.findings), aside + len(report.unattributed)
            for finding in report.findings:
                print(f"  spurious: {target}: {finding.kind}, {finding.status}: {finding.case.describe()}",
                      file=sys.stderr)
    return done, run, found, aside, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=6, help="rounds of the targets per arm (seeds 0..N-1)")
    parser.add_argument("--examples", type=int, default=60, help="examples per check")
    parser.add_argument("--timeout", type=float, default=0.05, help="per-case timeout, seconds")
    parser.add_argument("--busy", type=int, default=2 * (os.cpu_count() or 1), help="busy loops beside the harness")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    os.nice(10)  # the ranks inherit it: the busy loops come first
    watched = watch.Watch.more_time
    rows = []
    try:
        with LocalPool() as pool:
            for name, more_time in (("off", lambda self, ranks, now: None), ("on", watched)):
                watch.Watch.more_time = more_time  # type: ignore[method-assign]
                done, run, found, aside, seconds = run_arm(pool, args.checks, args.examples, args.timeout)
                rows.append((name, str(done), str(run), str(found), str(aside), f"{seconds:.0f}"))
    finally:
        watch.Watch.more_time = watched  # type: ignore[method-assign]
        for loop in busy:
            loop.kill()
            loop.wait()
    print(f"gather-harness overload: timeout {args.timeout:g} s, {args.busy} busy loops on {os.cpu_count()} cores, "
          f"harness at nice 10, {args.examples} examples per check")
    print()
    print((markdown_table if args.markdown else text_table)(HEADER, rows))


if __name__ == "__main__":
    main()
