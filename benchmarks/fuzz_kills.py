"""A long ``fuzz`` killed at random moments: every summary it leaves parses and is at most ``--save-every`` old.

Run from the repository root::

    python benchmarks/fuzz_kills.py                 # 30 minutes in 6 runs, 5 of them killed
    python benchmarks/fuzz_kills.py --minutes 3     # the same, shorter

The fuzz time is cut into ``--kills`` + 1 runs of ``python -m harness fuzz --variants ours_sum
--json ...`` (a correct variant: nothing ends a run early).  Each of the first ``--kills``
runs gets SIGKILL at a random moment of its second half (no handler runs: what is on disk is
what a power cut would leave); the last one ends on its own.  After each run: the summary
must parse, say ``running`` (killed) or ``finished``, and its ``updated_at`` must be at most
``--save-every`` seconds (plus one second of timestamp rounding) before the kill; no
half-written ``.tmp`` copy may stay once the next run has written; and two seconds after a
kill no process of the killed run may be left (ranks die with their driver).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.soak import MARK, marked_running  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402


def one_run(summary: str, seconds: float, save_every: float, seed: int, kill_at: float | None) -> tuple[str, ...]:
    """One fuzz run, killed ``kill_at`` seconds after its first summary, or left to finish."""
    command = [sys.executable, "-m", "harness", "fuzz", "--variants", "ours_sum", "--duration", f"{seconds:.0f}s",
               "--json", summary, "--save-every", str(save_every), "--seed", str(seed), "--quiet"]
    mark = f"fuzz-kills-{os.getpid()}-{seed}"
    started = time.monotonic()
    fuzz = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, MARK: mark},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if kill_at is None:
        status = fuzz.wait(timeout=seconds + 300)
        killed = None
    else:
        while not os.path.exists(summary) and fuzz.poll() is None:
            time.sleep(0.1)
        time.sleep(kill_at)
        fuzz.send_signal(signal.SIGKILL)
        killed = datetime.datetime.now(datetime.UTC)
        status = fuzz.wait()
        time.sleep(2.0)
    left = marked_running(mark)
    try:
        document = json.load(open(summary))
    except (OSError, ValueError) as exc:
        return (f"{'killed' if killed else 'finished'} after {time.monotonic() - started:.0f} s", "-",
                f"does not parse: {exc}", "-", str(len(left)), "MISSED")
    updated = datetime.datetime.fromisoformat(document["updated_at"])
    lag = (killed - updated).total_seconds() if killed else 0.0
    expected_status = "running" if killed else "finished"
    partials = [name for name in os.listdir(os.path.dirname(summary)) if name.endswith(".tmp")]
    ok = (document["status"] == expected_status and lag <= save_every + 1.0 and not left
          and (killed is not None or (status == 0 and not partials)))
    return (f"{'killed' if killed else 'finished'} after {time.monotonic() - started:.0f} s (exit {status})",
            f"{document['status']}, {document['examples']} examples, verdict {document['verdict']}",
            f"{lag:.1f} s" if killed else "-", f"{len(partials)} .tmp", str(len(left)), "met" if ok else "MISSED")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--save-every", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    seconds = 60 * args.minutes / (args.kills + 1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="gather-fuzz-kills-") as scratch:
        summary = os.path.join(scratch, "fuzz.json")
        for run in range(args.kills + 1):
            kill_at = rng.uniform(0.5, 0.95) * seconds if run < args.kills else None
            rows.append((str(run + 1), *one_run(summary, seconds, args.save_every, args.seed + run, kill_at)))
            print(f"run {run + 1}: {rows[-1]}", file=sys.stderr, flush=True)
    header = ("run", "end", "summary on disk", "kill - updated_at", "partials", "processes left", "verdict")
    print(f"gather-harness fuzz kills ({args.minutes:g} min in {args.kills + 1} runs, --save-every {args.save_every:g} s)")
    print((markdown_table if args.markdown else text_table)(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
