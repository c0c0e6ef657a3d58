"""Soak: thousands of cases, faults among them, and nothing may leak, be lost or contaminate a verdict.

Run from the repository root::

    python benchmarks/soak.py                  # 10,000 cases (about fifteen minutes on 2 cores)
    python benchmarks/soak.py --cases 1000     # a shorter soak
    python benchmarks/soak.py --minutes 5      # a time bound instead
    python benchmarks/soak.py --markdown       # the table as Markdown

A script, not a test: it prints one table, every target beside what was measured.

1. **Cases**: one warm pool runs N cases of ``tests/planted/faults.py`` in a seeded random
   order: mostly the correct gather, and with ``--fault-rate`` one of its planted faults
   (hang, gloo abort, segfault, ``os._exit``, SIGKILL, an exception on one rank, a desync,
   a thread never stopped, a file never closed, torch's global state changed).  Each case's
   right verdict is known: the fault kind the pool must report, the leak it must notice,
   or a pass.  A correct case judged anything but a pass is *misjudged*; the ones right
   after a fault are counted apart.
2. **Resources**, sampled every ``--sample-every`` cases: the RSS of the driver and of every
   rank, the driver's open fds and threads, its child processes and the forkserver's, the
   temporary entries the pool owns, ``/dev/shm`` entries, and the size of an example database
   that a short ``run_check`` with a planted bug writes at every sample (the search the
   database serves).  Growth is measured from the first sample at or after 10 % of the run
   (warm-up) to the last.
3. **Exit**: rank processes alive after ``pool.close()`` (orphans), and, for a ``check``,
   ``fuzz``, ``report`` and a pytest session run as subprocesses, processes they started that
   are still running the moment each returns.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script only benchmarks/ is on the path; ranks inherit the driver's

from hypothesis import settings  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402

from harness.core.case import Case, RankSpec  # noqa: E402
from harness.core.checks import check_outcome  # noqa: E402
from harness.core.contract import Contract  # noqa: E402
from harness.pool.faults import Outcome  # noqa: E402
from harness.pool.pool import LocalPool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.engine import run_check  # noqa: E402

PLANTED = "tests.planted.faults"
#: kind -> (planted function, what the pool must report: a fault kind, "leak: <words>", or "pass")
KINDS: dict[str, tuple[str, str]] = {
    "correct": ("correct", "pass"),
    "hang": ("hang_rank1", "hang"),
    "gloo abort": ("abort_mismatch", "desync"),
    "segfault": ("segfault_rank1", "crash"),
    "os._exit": ("exit_rank1", "crash"),
    "SIGKILL": ("killed_by_sigkill_rank1", "crash"),
    "exception on one rank": ("raise_rank1", "exception"),
    "desync": ("desync_extra_collective", "desync"),
    "thread left running": ("leaks_thread", "leak: thread"),
    "file left open": ("leaks_file", "leak: file descriptor"),
    "global state changed": ("leaves_global_state", "pass"),
}
FAULT_KINDS = [kind for kind in KINDS if kind != "correct"]
RSS_GROWTH_TARGET = 0.10


# -- what the system holds ---------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a live process, or ``None``."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _running(pids: set[int]) -> list[int]:
    """The ones still running: alive and not a zombie waiting to be reaped."""
    return [pid for pid in pids if (stat := _proc_stat(pid)) is not None and stat[0] != "Z"]


#: The environment variable that marks every process a command started (they inherit it).
MARK = "GATHER_SOAK_MARK"


def marked_running(mark: str) -> list[int]:
    """The running processes whose environment carries ``MARK=mark``: what one command started."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for pid in _running(set(_pids())):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if needle in handle.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _count(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return 0


def _tree_size(path: str) -> tuple[int, int]:
    """(files, bytes) below ``path``."""
    files = size = 0
    for folder, _, names in os.walk(path):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(folder, name))
    return files, size


def _rank_pids(pool: LocalPool) -> list[int]:
    sets = [*pool.sets.values(), *(spare for spares in pool.spares.values() for spare in spares)]
    return [proc.pid for rank_set in sets if not rank_set.broken for proc in rank_set.procs if proc.pid]


# -- the soak ----------------------------------------------------------------------------------


@dataclass
class Sample:
    cases: int
    values: dict[str, float]


@dataclass
class Tally:
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    right: collections.Counter[str] = field(default_factory=collections.Counter)
    wrong: list[str] = field(default_factory=list)
    correct_cases: int = 0
    misjudged: int = 0
    misjudged_after_fault: int = 0
    after_fault: int = 0
    samples: list[Sample] = field(default_factory=list)
    rank_pids: set[int] = field(default_factory=set)


def _case(rng: random.Random, kind: str) -> Case:
    world = rng.choice((2, 2, 2, 3, 4))
    lengths = [rng.randint(0, 5) for _ in range(world)]
    if kind == "gloo abort":  # unpadded all_gather: only unequal lengths abort
        lengths[1] = lengths[0] + 1
    return Case(ranks=tuple(RankSpec((n, 2), seed=rng.randrange(2**32)) for n in lengths), dim=0)


def verdict_of(outcome: Outcome) -> str:
    """What the pool reported, in the words of :data:`KINDS`."""
    if outcome.fault:
        return outcome.fault
    if outcome.leaks:
        return "leak: " + "; ".join(outcome.leaks)
    violations = check_outcome(outcome)
    return "pass" if not violations else "violation: " + violations[0].describe().splitlines()[0]


def judged_right(expected: str, got: str) -> bool:
    if expected.startswith("leak: "):
        return got.startswith("leak: ") and expected.removeprefix("leak: ") in got
    return got == expected


def sample(pool: LocalPool, cases: int, scratch: str, seed: int) -> Sample:
    """Every sampled resource now; first a short search with a planted bug writes to the database."""
    database = os.path.join(scratch, "database")
    run_check("tests.planted.bugs:reversed_ranks", Contract(world_sizes=(1, 2)), max_examples=20, seed=seed,
              pool=pool, base_settings=settings(database=DirectoryBasedExampleDatabase(database)))
    driver = os.getpid()
    forkserver = {pid for pid in _pids() if (stat := _proc_stat(pid)) and stat[1] == driver}
    children = [pid for pid in _pids() if (stat := _proc_stat(pid)) and stat[1] in forkserver | {driver}]
    ranks = _rank_pids(pool)
    rank_rss = [_rss_kib(pid) for pid in ranks]
    db_files, db_bytes = _tree_size(database)
    temp = [name for name in os.listdir(tempfile.gettempdir()) if name.startswith("gather-harness-")]
    return Sample(cases, {
        "driver RSS (MiB)": _rss_kib(driver) / 1024,
        "largest rank RSS (MiB)": max(rank_rss, default=0) / 1024,
        "driver open fds": _count("/proc/self/fd"),
        "driver threads": threading.active_count(),
        "child processes (driver + forkserver)": len(children),
        "live ranks": len(ranks),
        "temporary entries (pool dirs + files in them)": len(temp) + sum(
            _count(os.path.join(tempfile.gettempdir(), name)) for name in temp),
        "/dev/shm entries": _count("/dev/shm"),
        "example database files": db_files,
        "example database KiB": db_bytes / 1024,
    })


def soak(cases: int, minutes: float | None, seed: int, fault_rate: float, every: int, timeout: float,
         scratch: str) -> tuple[Tally, LocalPool, float]:
    rng = random.Random(seed)
    tally = Tally()
    pool = LocalPool(timeout=timeout)
    started = time.monotonic()
    stop_at = None if minutes is None else started + 60 * minutes
    previous_faulty = False
    done = 0
    while done < cases and (stop_at is None or time.monotonic() < stop_at):
        kind = rng.choice(FAULT_KINDS) if rng.random() < fault_rate else "correct"
        function, expected = KINDS[kind]
        outcome = pool.run(_case(rng, kind), f"{PLANTED}:{function}", check_grad=False)
        got = verdict_of(outcome)
        tally.injected[kind] += 1
        if judged_right(expected, got):
            tally.right[kind] += 1
        elif len(tally.wrong) < 10:
            tally.wrong.append(f"case {done}: {kind}: expected {expected}, got {got[:300]}")
        if kind == "correct":
            tally.correct_cases += 1
            tally.after_fault += previous_faulty
            if got != "pass":
                tally.misjudged += 1
                tally.misjudged_after_fault += previous_faulty
        previous_faulty = kind != "correct"
        tally.rank_pids.update(_rank_pids(pool))
        done += 1
        if done % every == 0 or done == cases:
            tally.samples.append(sample(pool, done, scratch, seed + done))
            print(f"[{time.monotonic() - started:7.1f} s] {done} cases, {sum(tally.injected.values()) - tally.correct_cases}"
                  f" faults, {tally.misjudged} misjudged, {len(tally.wrong)} fault(s) misreported", file=sys.stderr,
                  flush=True)
    return tally, pool, time.monotonic() - started


# -- commands: nothing they started may still run when they return ---------------------------------


def survivors(command: list[str], timeout: float = 600) -> tuple[int, int, float]:
    """(exit status, processes the command started that are running the moment it returns, seconds).

    Output goes to /dev/null, not a pipe: waiting for a pipe's end would wait for every process
    holding it.  A process counts when it inherited the command's :data:`MARK`."""
    mark = f"soak-{os.getpid()}-{time.monotonic_ns()}"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gather-soak-cmd-") as scratch:
        env = {**os.environ, "PYTHONPATH": ROOT, MARK: mark}
        done = subprocess.run(command, cwd=scratch, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=timeout)
        alive = marked_running(mark)
    return done.returncode, len(alive), time.monotonic() - started


COMMANDS: list[tuple[str, list[str]]] = [
    ("check (hang found)", ["-m", "harness", "check", f"{PLANTED}:hang_rank1", "--timeout", "2", "--seed", "1"]),
    ("fuzz (10 s)", ["-m", "harness", "fuzz", "--variants", "ours_sum", "--duration", "10s", "--seed", "1"]),
    ("report (2 variants)", ["-m", "harness", "report", "--variants", "ours_sum,clip4clip_all_gather",
                             "--max-examples", "20"]),
    ("pytest session", ["-m", "pytest", "-q", "-p", "no:randomly", os.path.join(ROOT, "tests", "test_pool_faults.py"),
                        "-k", "segfault or desync_extra", "--rootdir", ROOT]),
]


# -- the table -------------------------------------------------------------------------------------


def growth_rows(samples: list[Sample]) -> list[tuple[str, str, str, str]]:
    """Each resource from the first sample at or after 10 % of the run to the last."""
    if len(samples) < 2:
        return [("resources", "fewer than two samples", "-", "-")]
    last = samples[-1]
    first = next(s for s in samples if s.cases >= last.cases * 0.1)
    rows = []
    for name, end in last.values.items():
        start = first.values[name]
        if "RSS" in name:
            ratio = (end - start) / start if start else 0.0
            rows.append((f"growth: {name}", f"{start:.1f} -> {end:.1f} ({ratio:+.1%})",
                         f"<= +{RSS_GROWTH_TARGET:.0%}", _met(ratio <= RSS_GROWTH_TARGET)))
        elif "database" in name:
            rows.append((f"growth: {name}", f"{start:.0f} -> {end:.0f}", "bounded", "-"))
        else:
            rows.append((f"growth: {name}", f"{start:.0f} -> {end:.0f}", "0", _met(end <= start)))
    rows.append(("samples", f"{len(samples)}, from case {first.cases} to {last.cases}", "-", "-"))
    return rows


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long instead")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--fault-rate", type=float, default=0.1, help="share of cases that run a planted fault")
    parser.add_argument("--sample-every", type=int, default=250)
    parser.add_argument("--timeout", type=float, default=1.5, help="per case: a hang costs this long")
    parser.add_argument("--skip-commands", action="store_true", help="no check/fuzz/report/pytest subprocesses")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    os.chdir(ROOT)

    with tempfile.TemporaryDirectory(prefix="gather-soak-") as scratch:
        tally, pool, elapsed = soak(args.cases, args.minutes, args.seed, args.fault_rate, args.sample_every,
                                    args.timeout, scratch)
        replaced = pool.spawned_sets
        pool.close()
        orphans = _running(tally.rank_pids)
    faults = sum(tally.injected.values()) - tally.correct_cases
    right_faults = sum(tally.right[kind] for kind in FAULT_KINDS)
    rows: list[tuple[str, str, str, str]] = [
        ("cases run", f"{sum(tally.injected.values())} in {elapsed:.0f} s", "-", "-"),
        ("faults injected", f"{faults}: " + ", ".join(f"{k} {tally.injected[k]}" for k in FAULT_KINDS), "-", "-"),
        ("faults reported with the right kind", f"{right_faults} of {faults}", "all", _met(right_faults == faults)),
        ("correct cases misjudged", f"{tally.misjudged} of {tally.correct_cases}", "0", _met(tally.misjudged == 0)),
        ("  of them right after a fault", f"{tally.misjudged_after_fault} of {tally.after_fault}", "0",
         _met(tally.misjudged_after_fault == 0)),
        ("rank sets started", str(replaced), "-", "-"),
        ("orphan ranks after pool.close()", f"{len(orphans)} of {len(tally.rank_pids)} rank processes", "0",
         _met(not orphans)),
    ]
    rows += growth_rows(tally.samples)
    if not args.skip_commands:
        for name, command in COMMANDS:
            status, alive, seconds = survivors([sys.executable, *command])
            rows.append((f"still running as `{name}` returns", f"{alive} (exit {status}, {seconds:.0f} s)", "0",
                         _met(alive == 0)))
    print(f"gather-harness soak (seed {args.seed}, fault rate {args.fault_rate}, timeout {args.timeout} s, "
          f"{os.cpu_count()} cores)")
    print((markdown_table if args.markdown else text_table)(("measurement", "value", "target", "verdict"), rows))
    for line in tally.wrong:
        print("misreported:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
