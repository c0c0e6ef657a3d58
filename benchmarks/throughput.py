"""Speed of the whole check, and how fast a planted bug becomes a shrunk finding.

Run from the repository root::

    python benchmarks/throughput.py              # the full table (about four minutes)
    python benchmarks/throughput.py --quick      # fewer examples, one finding per kind
    python benchmarks/throughput.py --markdown   # the same table as Markdown

One table, every number measured in the same run on the same machine (absolute times move
with the load of a shared box, ratios much less).  A script, not a test: a missed target is
printed, never raised.

1. **throughput**: ``run_check`` of this project's correct ragged gather
   (``harness.ragged:all_gather_ragged``: one shape exchange and one all_gather_single
   forward; ragged, any dim, every gloo dtype, no gradient), Hypothesis included, on a warm
   pool, at W=2 and W=4: wall time of the whole ``run_check`` (probe and strata included)
   over the examples it ran.  Against it, the **raw call**: the same gather called back to
   back in the same warm ranks on the very inputs that check drew, with the ranks'
   collective log unhooked: what one call of the gather costs outside any harness.
   Targets: at least 200 examples/s at W=2; at most 3.0 raw calls per example.
2. **sampling**: the companion and repeat calls of the ``stable``/``repeatable`` properties
   run on the strata and one drawn example in four (``harness.search.session.REPEAT_EVERY``); the
   planted bugs only those properties catch must still be found.
3. **time to a shrunk finding**: the whole ``python -m harness check`` command (interpreter
   start, pool start, probe, search, shrink, confirmation, report) on planted bugs, wall
   time of the subprocess.  Targets: a value or gradient finding in at most 8 s; every
   crash, hang and desync finding in at most 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script only benchmarks/ is on the path; ranks inherit the driver's

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from harness.core.case import Case, make_input  # noqa: E402
from harness.core.contract import Contract  # noqa: E402
from harness.pool.pool import LocalPool, shared_pool  # noqa: E402
from harness.ranks.rank import RECORDED  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.engine import run_check  # noqa: E402
from harness.search.results import Progress  # noqa: E402
from harness.search.session import REPEAT_EVERY  # noqa: E402

GATHER = "harness.ragged:all_gather_ragged"
HERE = "benchmarks.throughput"
TARGET_RATE_W2 = 200.0
TARGET_RAW_CALLS = 3.0
TARGET_PLAIN_S = 8.0
TARGET_FAULT_S = 30.0

#: (kind, target, check arguments): the planted bugs of section 3.
PLAIN_BUGS = (
    ("value", "tests.planted.bugs:reversed_ranks", ()),
    ("gradient", "tests.planted.bugs:local_only_backward", ("--grad", "sum")),
)
FAULTS = (
    ("desync", "tests.planted.faults:desync_extra_collective", ()),
    ("hang", "tests.planted.faults:hang_rank1", ()),
    ("raise while others wait", "tests.planted.faults:raise_rank1", ()),
    ("crash (gloo abort)", "tests.planted.faults:abort_mismatch", ()),
    ("crash (SIGSEGV)", "tests.planted.faults:segfault_rank1", ()),
    ("crash (exit)", "tests.planted.faults:exit_rank1", ()),
    ("crash (SIGKILL)", "tests.planted.faults:killed_by_sigkill_rank1", ()),
)
#: Planted bugs only the sampled companion/repeat calls catch (section 2).
SAMPLED_BUGS = (
    ("stable", "tests.planted.bugs:shared_output_buffer"),
    ("repeatable", "tests.planted.bugs:degrades_every_third_call"),
)


# -- run inside the ranks (pool.call) ----------------------------------------------------------


def raw_calls(cases: list[str], repeats: int, target: str = "harness.ragged:all_gather_ragged") -> float:
    """Seconds per plain call of the gather (``target``, called as ``f(x, dim)``) on this rank's inputs
    of ``cases``, collective log unhooked.

    The inputs are built before the clock starts; the calls run back to back ``repeats``
    times over all cases; nothing of the harness runs in the loop.
    """
    from harness.ranks.targets import load

    gather = load(target)

    rank = dist.get_rank()
    inputs = [(make_input(case, rank), case.dim) for case in map(Case.from_json, cases)]
    hooked = {name: getattr(dist, name) for name in RECORDED if hasattr(dist, name)}
    for name, function in hooked.items():
        setattr(dist, name, getattr(function, "__wrapped__", function))
    try:
        dist.barrier()
        started = time.perf_counter()
        with torch.no_grad():
            for _ in range(repeats):
                for x, dim in inputs:
                    gather(x, dim)
        return (time.perf_counter() - started) / (repeats * len(inputs))
    finally:
        for name, function in hooked.items():
            setattr(dist, name, function)


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class Row:
    section: str
    measurement: str
    value: str
    target: str = "-"
    verdict: str = "-"


def verdict(met: bool, missed_by: str = "") -> str:
    return "met" if met else f"missed{f' by {missed_by}' if missed_by else ''}"


def bench_throughput(pool: LocalPool, world: int, examples: int, seed: int) -> list[Row]:
    """Section 1 at one world size: whole ``run_check`` per example against the raw call."""
    contract = Contract(ragged=True, dims="any", grad="none", world_sizes=(world, world))
    run_check(GATHER, contract, max_examples=20, seed=seed + 1, pool=pool)  # warm: probe, capabilities, imports
    seen = Progress()

    def keep(progress: Progress) -> None:
        nonlocal seen
        seen = progress

    started = time.perf_counter()
    report = run_check(GATHER, contract, max_examples=examples, seed=seed, pool=pool, on_example=keep)
    elapsed = time.perf_counter() - started
    per_example = elapsed / report.examples
    cases = [case.to_json() for case, _ in seen.seen]
    raws = [value for value in pool.call(world, f"{HERE}:raw_calls", cases, 3)]
    raw = max(result.value for result in raws if result is not None)  # the slowest rank sets the pace
    rate, ratio = report.examples / elapsed, per_example / raw
    label = f"W={world}"
    rows = [Row("1 throughput", f"{label}: run_check, {report.examples} examples ({report.verdict})",
                f"{per_example * 1e3:.2f} ms/example = {rate:.0f} examples/s"),
            Row("1 throughput", f"{label}: raw call of the gather on the same {len(cases)} inputs",
                f"{raw * 1e3:.3f} ms/call"),
            Row("1 throughput", f"{label}: raw calls per example", f"{ratio:.2f}x",
                f"<= {TARGET_RAW_CALLS:.1f}x", verdict(ratio <= TARGET_RAW_CALLS, f"{ratio / TARGET_RAW_CALLS:.1f}x"))]
    if world == 2:
        rows.insert(1, Row("1 throughput", f"{label}: examples/s", f"{rate:.0f}", f">= {TARGET_RATE_W2:.0f}",
                           verdict(rate >= TARGET_RATE_W2, f"{TARGET_RATE_W2 / rate:.1f}x")))
    return rows


def bench_sampling(pool: LocalPool, seed: int) -> list[Row]:
    """Section 2: the bugs only the sampled stability calls catch are still found."""
    rows = []
    for prop, target in SAMPLED_BUGS:
        contract = Contract(ragged=True, dims="any", grad="none")
        report = run_check(target, contract, max_examples=100, seed=seed, pool=pool)
        found = [f for f in report.findings if f.property == prop]
        value = f"found after {report.examples} examples" if found else f"NOT found ({report.verdict})"
        rows.append(Row("2 sampling", f"{target.split(':')[1]} ({prop}; 1 drawn example in {REPEAT_EVERY} repeats)",
                        value, "found", verdict(bool(found))))
    return rows


def time_command(target: str, extra: tuple[str, ...], seed: int) -> tuple[float, str]:
    """Wall seconds of the whole ``check`` command, and what it found (the JSON report's properties)."""
    with tempfile.TemporaryDirectory(prefix="gather-bench-") as scratch:
        out = os.path.join(scratch, "report.json")
        command = [sys.executable, "-m", "harness", "check", target, "--seed", str(seed), "--json", out,
                   "--quiet", "--repro-dir", scratch, *extra]
        env = {**os.environ, "PYTHONPATH": ROOT}
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - started
        if done.returncode != 1:
            return elapsed, f"exit {done.returncode} (expected 1): {done.stderr.strip().splitlines()[-1:]}"
        findings = json.load(open(out))["violations"]
        return elapsed, "; ".join(f"{f['property']} {f['status']}: {f['case_line']}" for f in findings)


def bench_findings(seed: int, quick: bool) -> list[Row]:
    """Section 3: time to a shrunk, confirmed, reported finding, whole command."""
    rows = []
    faults = FAULTS[:1] if quick else FAULTS
    for kinds, limit in ((PLAIN_BUGS, TARGET_PLAIN_S), (faults, TARGET_FAULT_S)):
        for kind, target, extra in kinds:
            elapsed, found = time_command(target, extra, seed)
            rows.append(Row("3 time to finding", f"{kind}: {target.split(':')[1]} -> {found}",
                            f"{elapsed:.1f} s", f"<= {limit:.0f} s",
                            verdict(elapsed <= limit, f"{elapsed - limit:.1f} s")))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 examples, one fault kind")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args(argv)
    os.chdir(ROOT)  # ranks take the driver's cwd; targets import by name from it
    examples = 100 if args.quick else 300
    started = time.perf_counter()
    load = os.getloadavg()[0]
    pool = shared_pool()
    steps: list[Callable[[], list[Row]]] = [
        lambda: bench_throughput(pool, 2, examples, args.seed),
        lambda: bench_throughput(pool, 4, examples, args.seed),
        lambda: bench_sampling(pool, args.seed),
    ]
    rows: list[Row] = []
    try:
        for step in steps:
            rows += step()
    finally:
        pool.close()
    rows += bench_findings(args.seed, args.quick)
    header = ("section", "measurement", "value", "target", "verdict")
    cells = [(r.section, r.measurement, r.value, r.target, r.verdict) for r in rows]
    print(f"gather-harness throughput benchmark ({'quick' if args.quick else 'full'}; torch {torch.__version__}; "
          f"{os.cpu_count()} cores; {time.perf_counter() - started:.0f} s; load average {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; one run: ratios comparable, absolute times load-dependent)")
    print((markdown_table if args.markdown else text_table)(header, cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
