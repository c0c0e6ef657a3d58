"""Many runs at once: K ``check`` runs and a ``pytest -n 4`` plugin session started together, R rounds.

Run from the repository root::

    python benchmarks/concurrency.py               # 34 rounds of 5 checks + 1 pytest session: 204 starts
    python benchmarks/concurrency.py --rounds 2    # a quick look

What a team running the harness under ``pytest -n auto`` beside other CI jobs relies on: no run
disturbs another.  Rounds alternate between one shared working directory (every run writes its
``.gather-harness/`` there: the example database, repro scripts) and a fresh directory per run.
In a round, the checks alternate between a correct gather (``harness.ragged:gather_sum``, the
command line that once crashed at start-up when three ran together) and a planted bug
(``tests.planted.bugs:local_only_backward``, found by every run); the pytest session checks the
round's first target through the plugin.  Every run of a round starts at once.

Per start, against its expected exit status (0 for the correct gather, 1 for the bug):

- a **crash**: any other status, a Python traceback of the driver on stderr, or no end within
  ``--timeout`` (then it is killed); exit 3 (the harness could not run) is counted apart too;
- a **spurious finding**: exit 1 on the correct gather;
- a **missed bug**: exit 0 on the planted one;
- **processes left**: processes a run started (found by an environment marker) still running two
  seconds after every run of the round has returned.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
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

CORRECT = "harness.ragged:gather_sum"
BUGGY = "tests.planted.bugs:local_only_backward"
#: What marks a traceback of the driver (a rank's traceback inside a finding is indented).
TRACEBACK = "\nTraceback (most recent call last):"


@dataclasses.dataclass(frozen=True)
class Start:
    """One run of a round: what it checks, how, and where."""

    target: str
    pytest: bool
    cwd: str

    @property
    def expected(self) -> int:
        return 1 if self.target == BUGGY else 0

    def command(self, max_examples: int) -> list[str]:
        if self.pytest:
            return [sys.executable, "-m", "pytest", "-n", "4", "-q", "-p", "no:cacheprovider", "--gather-impl",
                    self.target, "--gather-grad", "sum", "--gather-max-examples", str(max_examples)]
        return [sys.executable, "-m", "harness", "check", self.target, "--grad", "sum", "--world-sizes", "1-4",
                "--max-examples", str(max_examples), "--quiet"]


@dataclasses.dataclass
class Tally:
    """What the starts of one kind of round came to."""

    starts: int = 0
    statuses: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    crashes: int = 0
    harness_errors: int = 0
    spurious: int = 0
    missed: int = 0
    left: int = 0
    seconds: float = 0.0
    first_crash: str = ""

    def add(self, start: Start, status: int, stderr: str) -> None:
        """Count one finished start (``status`` -9: it was killed at the timeout)."""
        self.starts += 1
        self.statuses[status] += 1
        self.harness_errors += status == 3
        crashed = status not in (0, 1) or TRACEBACK in "\n" + stderr
        self.crashes += crashed
        self.spurious += start.expected == 0 and status == 1
        self.missed += start.expected == 1 and status == 0
        if crashed and not self.first_crash:
            self.first_crash = f"exit {status}: " + " ".join(stderr.strip().splitlines()[-3:])[:300]

    @property
    def met(self) -> bool:
        """0 crashes, 0 spurious findings, 0 missed bugs, 0 processes left."""
        return not (self.crashes or self.spurious or self.missed or self.left)

    def row(self, name: str) -> tuple[str, ...]:
        codes = ", ".join(f"{code}: {count}" for code, count in sorted(self.statuses.items()))
        return (name, str(self.starts), codes, str(self.crashes), str(self.harness_errors), str(self.spurious),
                str(self.missed), str(self.left), f"{self.seconds:.0f} s", "met" if self.met else "MISSED")

    def merge(self, other: Tally) -> Tally:
        return Tally(self.starts + other.starts, self.statuses + other.statuses, self.crashes + other.crashes,
                     self.harness_errors + other.harness_errors, self.spurious + other.spurious,
                     self.missed + other.missed, self.left + other.left, self.seconds + other.seconds,
                     self.first_crash or other.first_crash)


def plan(round_number: int, checks: int, scratch: str) -> list[Start]:
    """The starts of one round: even rounds share one directory, odd ones give each run its own."""
    shared = round_number % 2 == 0
    folder = os.path.join(scratch, f"round-{round_number}")
    starts = []
    for k in range(checks + 1):
        cwd = folder if shared else os.path.join(folder, f"run-{k}")
        os.makedirs(cwd, exist_ok=True)
        target = BUGGY if (k + round_number) % 2 else CORRECT
        starts.append(Start(target, pytest=k == checks, cwd=cwd))
    return starts


def run_round(starts: list[Start], tally: Tally, *, max_examples: int, timeout: float) -> None:
    """Start every run of the round at once, wait for all, count, then look for survivors."""
    mark = f"concurrency-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": ROOT, MARK: mark}
    env.pop("CI", None)  # the dev profile: the shared directory's example database is part of the test
    started = time.monotonic()
    running = [(start, subprocess.Popen(start.command(max_examples), cwd=start.cwd, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True))
               for start in starts]
    for start, process in running:
        try:
            _, stderr = process.communicate(timeout=max(1.0, started + timeout - time.monotonic()))
            status = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            _, stderr = process.communicate()
            status = -9
        tally.add(start, status, stderr)
    tally.seconds += time.monotonic() - started
    time.sleep(2.0)
    left = marked_running(mark)
    tally.left += len(left)
    for pid in left:  # ours (they carry the round's marker): do not let them run on
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=34)
    parser.add_argument("--checks", type=int, default=5, help="check runs per round, besides the pytest session")
    parser.add_argument("--max-examples", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=900.0, help="per round")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    tallies = {"one shared directory": Tally(), "a directory per run": Tally()}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="gather-concurrency-") as scratch:
        for number in range(args.rounds):
            tally = tallies["one shared directory" if number % 2 == 0 else "a directory per run"]
            run_round(plan(number, args.checks, scratch), tally, max_examples=args.max_examples, timeout=args.timeout)
            print(f"round {number + 1}: {tally.row('so far')}", file=sys.stderr, flush=True)
    total = tallies["one shared directory"].merge(tallies["a directory per run"])
    header = ("directories", "starts", "exit statuses", "crashes", "of them exit 3", "spurious findings",
              "missed bugs", "processes left", "time", "0/0/0/0")
    rows = [tally.row(name) for name, tally in tallies.items()] + [total.row("total")]
    print(f"gather-harness concurrency ({args.rounds} rounds of {args.checks} checks + 1 pytest -n 4 session, "
          f"{args.max_examples} examples each; {os.cpu_count()} cores; load average {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f})")
    print((markdown_table if args.markdown else text_table)(header, rows))
    if total.first_crash:
        print(f"first crash: {total.first_crash}")
    return 0 if total.met else 1


if __name__ == "__main__":
    sys.exit(main())
