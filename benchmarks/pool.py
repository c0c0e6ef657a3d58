"""Benchmark of the rank pool: cold start, per-case overhead, throughput, world-size switching.

Run from the repository root::

    python benchmarks/pool.py            # default repetitions (about two minutes)
    python benchmarks/pool.py --quick    # fewer repetitions (well under a minute)
    python benchmarks/pool.py --markdown # the same table as Markdown
    python benchmarks/pool.py --profile  # also cProfile some pool.run calls in the driver

It prints ONE table whose ratios were all measured in the same run on the same machine:
absolute numbers move with the machine's load, ratios much less.  This is a script, not a
test: a "missed" target is reported, never raised.

Sections:

1. cold start: ``LocalPool()`` to a ready set of W ranks (the forkserver warm-up, paid once per
   driver process, separately), against W fresh ``spawn`` processes that import torch and
   form a gloo group;
2. per-case overhead: ``pool.run`` of ``tests.planted.faults:correct`` (2 collectives per
   variant call; 1 call with ``repeat=False``, more with the default ``repeat=True``: the
   count is read from what a run recorded) against :func:`raw_loop`, the same collectives
   back to back in the same warm ranks (run there through ``pool.call``), with a breakdown
   (:func:`inrank_loop`: the rank side of ``pool.run`` without the pipe; pickling);
3. throughput: ``pool.run`` + ``check_outcome`` on varied cases, and ``run_check`` with
   Hypothesis generation;
4. switching world size by re-forming the group in live ranks (:func:`regroup`) against
   keeping one warm set per world size, which is what the pool does.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import multiprocessing
import os
import pstats
import socket
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script only benchmarks/ is on the path; ranks inherit the driver's

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed import distributed_c10d as c10d  # noqa: E402  (unwrapped by the rank's collective log)

TARGET = "tests.planted.faults:correct"
HERE = "benchmarks.pool"

# Targets (met when the measured value is on the right side).
TARGET_W4_READY_S = 1.5
TARGET_RATIO = 1.5
TARGET_RATE_W2 = 200.0


# =============================================================================================
# Functions run inside rank processes (via ``pool.call``) or spawned processes.


def _ragged_once(x: torch.Tensor, world: int) -> torch.Tensor:
    """``tests.planted.faults.correct`` along dim 0, with the unwrapped c10d collectives."""
    length = torch.tensor([x.shape[0]], dtype=torch.int64)
    sizes = [torch.zeros_like(length) for _ in range(world)]
    c10d.all_gather(sizes, length)
    longest = max(int(s) for s in sizes)
    padded = torch.zeros((longest,) + tuple(x.shape[1:]), dtype=x.dtype)
    padded[: x.shape[0]] = x
    pieces = [torch.empty_like(padded) for _ in range(world)]
    c10d.all_gather(pieces, padded)
    return torch.cat([p[: int(s)] for p, s in zip(pieces, sizes)])


def raw_loop(n_iter: int, lengths: tuple[int, ...], trailing: tuple[int, ...], dtype: str, calls: int) -> float:
    """Per iteration, exactly the collectives one ``pool.run`` causes; seconds per iteration.

    ``calls`` times (sizes all_gather + padded all_gather): the driver passes how many
    variant calls the harness really made (1 with ``repeat=False``; more with the default
    ``repeat=True``, which calls the variant again for the stability properties), read from
    the collectives a run recorded.  No harness code in the loop: no pipes, no pickling, no
    input recipes, no copies of results.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    shape = (lengths[rank],) + tuple(trailing)
    x = torch.arange(math.prod(shape), dtype=torch.int64).reshape(shape).to(getattr(torch, dtype))
    c10d.barrier()
    started = time.perf_counter()
    for _ in range(n_iter):
        for _ in range(calls):
            _ragged_once(x, world)
    return (time.perf_counter() - started) / n_iter


def inrank_loop(n_iter: int, case: Any, repeat: bool) -> tuple[float, float, int]:
    """The rank side of ``pool.run`` without the pipe: ``harness.ranks.rank.on_run`` back to back.

    Returns seconds per ``on_run`` (input recipe, the variant, copies of outputs and input),
    seconds per pickling of its result as the protocol does, and the pickled size in bytes.
    """
    import pickle

    from harness.core.procedure import RunRequest
    from harness.ranks import rank as rank_module

    log = rank_module.CollectiveLog(None)
    request = RunRequest(case=case, target=TARGET, check_grad=False, repeat=repeat)
    c10d.barrier()
    started = time.perf_counter()
    for _ in range(n_iter):
        result = rank_module.on_run(log, request)
        if result.error:
            raise RuntimeError(result.error)
    per_run = (time.perf_counter() - started) / n_iter
    started = time.perf_counter()
    for _ in range(n_iter):
        data = pickle.dumps(("result", result), protocol=pickle.HIGHEST_PROTOCOL)
    per_pickle = (time.perf_counter() - started) / n_iter
    return per_run, per_pickle, len(data)


_HOME_RANK: dict[str, int] = {}


def regroup(store_port: int, prefix: str, new_world: int) -> tuple[float, float]:
    """Leave the current group and form a new one of ``new_world`` ranks (a fresh store prefix).

    Ranks at or beyond ``new_world`` only leave.  Includes one all_reduce, so the new group is
    known to work.  Returns this rank's seconds in destroy_process_group and in forming the new group.
    """
    if "rank" not in _HOME_RANK:
        _HOME_RANK["rank"] = dist.get_rank()  # the first call runs in the pool's own group
    rank = _HOME_RANK["rank"]
    started = time.perf_counter()
    if dist.is_initialized():
        dist.destroy_process_group()
    destroyed = time.perf_counter()
    if rank < new_world:
        store = dist.PrefixStore(prefix, dist.TCPStore("127.0.0.1", store_port, is_master=False,
                                                        timeout=timedelta(seconds=60)))
        dist.init_process_group("gloo", store=store, rank=rank, world_size=new_world, timeout=timedelta(seconds=60))
        check = torch.ones(1)
        c10d.all_reduce(check)
        if int(check.item()) != new_world:
            raise RuntimeError(f"regrouped all_reduce gave {check.item()}, expected {new_world}")
    return destroyed - started, time.perf_counter() - destroyed


def _spawn_rank(rank: int, world: int, port: int, conn: Any) -> None:
    """A fresh ``spawn`` process (this module imported torch): form a gloo group, report, wait."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    conn.send("ready")
    conn.recv()
    dist.destroy_process_group()


# =============================================================================================
# Driver side.


@dataclass
class Row:
    section: str
    name: str
    value: str
    target: str = "—"
    verdict: str = "—"


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _s(seconds: float) -> str:
    return f"{seconds:.3f} s"


def _verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn_group(world: int, timeout: float = 120.0) -> float:
    """Seconds from starting ``world`` fresh spawn processes to all of them in one gloo group."""
    ctx = multiprocessing.get_context("spawn")
    port = _free_port()
    started = time.perf_counter()
    procs, conns = [], []
    try:
        for r in range(world):
            parent_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=_spawn_rank, args=(r, world, port, child_end), daemon=True)
            proc.start()
            child_end.close()
            procs.append(proc)
            conns.append(parent_end)
        for r, conn in enumerate(conns):
            if not conn.poll(max(0.0, started + timeout - time.perf_counter())):
                raise RuntimeError(f"spawned rank {r} of {world} was not ready within {timeout:.0f}s")
            conn.recv()
        elapsed = time.perf_counter() - started
        for conn in conns:
            conn.send("stop")
    finally:
        for proc in procs:
            proc.join(timeout=10.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
        for conn in conns:
            conn.close()
    return elapsed


def bench_cold_start(reps: int, spawn_reps: int, spawn_worlds: tuple[int, ...], spawn_budget_s: float) -> list[Row]:
    from harness.pool.pool import LocalPool

    sec = "1 cold start"
    started = time.perf_counter()
    first = LocalPool()
    first.rank_set("gloo", "cpu", 1)
    first_s = time.perf_counter() - started
    first.close()

    worlds = (1, 2, 4, 8)
    ready: dict[int, list[float]] = {w: [] for w in worlds}
    for _ in range(reps):
        for w in worlds:
            started = time.perf_counter()
            pool = LocalPool()
            pool.rank_set("gloo", "cpu", w)
            ready[w].append(time.perf_counter() - started)
            pool.close()
    rows = [Row(sec, "forkserver warm-up (once per driver; first LocalPool+W=1 minus a later one)",
                f"{_s(first_s - _median(ready[1]))} (first LocalPool+W=1: {_s(first_s)})")]
    for w in worlds:
        row = Row(sec, f"LocalPool() -> W={w} ranks ready (warm forkserver, median of {reps})", _s(_median(ready[w])))
        if w == 4:
            row.target, row.verdict = f"<= {TARGET_W4_READY_S} s", _verdict(_median(ready[w]) <= TARGET_W4_READY_S)
        rows.append(row)
    for w in spawn_worlds:
        times: list[float] = []
        while len(times) < spawn_reps and (not times or sum(times) < spawn_budget_s):  # a loaded box: fewer reps
            times.append(spawn_group(w))
        med = _median(times)
        rows.append(Row(sec, f"spawn W={w} fresh ranks (import torch + gloo group, median of {len(times)})",
                        f"{_s(med)} ({med / _median(ready[w]):.0f}x the pool)"))
    return rows


OVERHEAD_CASES: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {
    2: ((3, 5), (4,)),
    4: ((3, 5, 0, 2), (4,)),
}


def _overhead_case(world: int):
    from harness.core.case import Case, RankSpec

    lengths, trailing = OVERHEAD_CASES[world]
    return Case(ranks=tuple(RankSpec((n,) + trailing) for n in lengths))


def _time_runs(pool, case, n: int, repeat: bool) -> tuple[list[float], list[float], Any]:
    """Driver wall seconds of ``n`` pool.run calls, the slowest rank's in-rank forward time, the last outcome."""
    walls, forwards = [], []
    outcome = None
    for _ in range(n):
        started = time.perf_counter()
        outcome = pool.run(case, TARGET, repeat=repeat)
        walls.append(time.perf_counter() - started)
        if outcome.fault or outcome.errors:
            raise RuntimeError(f"benchmark case failed: {outcome.describe_fault() if outcome.fault else outcome.errors[0].error}")
        forwards.append(max(r.timings.get("forward_s", 0.0) for r in outcome.results))
    return walls, forwards, outcome


def _call_values(pool, world: int, func: str, *args: Any) -> list[Any]:
    results = pool.call(world, f"{HERE}:{func}", *args, timeout=120)
    bad = [r for r in results if r is None or r.error]
    if bad:
        raise RuntimeError(f"{func} failed: {bad[0].error if bad[0] else 'rank died'}")
    return [r.value for r in results]


def _unpickle_s(outcome, n: int = 50) -> float:
    """Driver seconds to unpickle all W results of one outcome, as the protocol receives them."""
    import pickle

    blobs = [pickle.dumps(("result", r), protocol=pickle.HIGHEST_PROTOCOL) for r in outcome.results]
    started = time.perf_counter()
    for _ in range(n):
        for blob in blobs:
            pickle.loads(blob)
    return (time.perf_counter() - started) / n


def bench_overhead(blocks: int, per_block: int) -> list[Row]:
    from harness.pool.pool import shared_pool

    sec = "2 per-case overhead"
    pool = shared_pool()
    rows: list[Row] = []
    for world in (2, 4):
        case = _overhead_case(world)
        lengths, trailing = OVERHEAD_CASES[world]
        shapes = ",".join("(" + ",".join(map(str, (n,) + trailing)) + ")" for n in lengths)
        n = per_block if world == 2 else max(5, per_block // 2)  # W=4 cases are 3-4x slower
        for repeat in (False, True):
            # warm (target import, allocator, connections), and count what the harness really does
            collectives = len(_time_runs(pool, case, 10, repeat)[2].results[0].collectives)
            calls = max(1, collectives // 2)  # simple_ragged: 2 collectives per call
            _call_values(pool, world, "raw_loop", 10, lengths, trailing, case.dtype, calls)
            _call_values(pool, world, "inrank_loop", 10, case, repeat)
            walls: list[float] = []
            forwards: list[float] = []
            raws: list[float] = []
            inranks: list[float] = []
            pickles: list[float] = []
            size = 0
            outcome = None
            for _ in range(blocks):  # interleaved, so drifting load hits all three alike
                w, f, outcome = _time_runs(pool, case, n, repeat)
                walls += w
                forwards += f
                raws.append(max(_call_values(pool, world, "raw_loop", n, lengths, trailing, case.dtype, calls)))
                values = _call_values(pool, world, "inrank_loop", n, case, repeat)
                inranks.append(max(v[0] for v in values))
                pickles.append(max(v[1] for v in values))
                size = max(v[2] for v in values)
            harness, raw, inrank, pickled = _median(walls), _median(raws), _median(inranks), _median(pickles)
            unpickled = _unpickle_s(outcome)
            ratio = harness / raw
            label = f"repeat={repeat}: {calls} call{'s' if calls > 1 else ''}, {collectives} collectives"
            rows.append(Row(sec, f"W={world} {shapes}, {label}: pool.run / raw loop",
                            f"{ratio:.1f}x ({_ms(harness)} vs {_ms(raw)})",
                            f"<= {TARGET_RATIO}x", _verdict(ratio <= TARGET_RATIO)))
            rest = harness - inrank - pickled - unpickled
            rows.append(Row(sec, f"  breakdown (medians of separate loops, {blocks}x{n})",
                            f"on_run in rank {_ms(inrank)} (forward {_ms(_median(forwards))}) + pickle {_ms(pickled)}"
                            f" ({size / 1024:.1f} KiB/rank) + driver unpickle {_ms(unpickled)}"
                            f" + pipes/wake-ups/rest {_ms(rest) if rest >= 0 else '<0 (noise)'}"))
    return rows


def _varied_cases(world: int) -> list:
    """A few ragged cases of different shapes, dims, dtypes, layouts and value recipes."""
    from harness.core.case import Case, RankSpec

    def lens(*base: int) -> tuple[int, ...]:
        return tuple(base[r % len(base)] + (r // len(base)) for r in range(world))

    cases = [
        Case(ranks=tuple(RankSpec((n, 4)) for n in lens(3, 5)), dtype="float32"),
        Case(ranks=tuple(RankSpec((n, 3)) for n in lens(0, 2)), dtype="int64"),
        Case(ranks=tuple(RankSpec((2, n, 3)) for n in lens(7, 1)), dim=1, dtype="float64"),
        Case(ranks=tuple(RankSpec((n,), values="special", seed=1) for n in lens(6, 1)), dtype="bfloat16"),
        Case(ranks=tuple(RankSpec((4, n), layout="transposed") for n in lens(2, 5)), dim=-1, dtype="int32"),
        Case(ranks=tuple(RankSpec((n, 8), layout="offset", values="random", seed=3) for n in lens(1, 9)), dtype="float16"),
        Case(ranks=tuple(RankSpec((n, 2), layout="strided", values="padding") for n in lens(3, 1)), dtype="bool"),
        Case(ranks=tuple(RankSpec((n, 2, 2), values="random", seed=7) for n in lens(4, 0)), dtype="complex64"),
    ]
    return cases


def bench_throughput(seconds: float, hyp_examples: int) -> list[Row]:
    from harness.core.checks import check_outcome
    from harness.pool.pool import shared_pool

    sec = "3 throughput"
    pool = shared_pool()
    rows: list[Row] = []
    for world in (2, 4):
        cases = _varied_cases(world)
        for case in cases:  # warm-up, and make sure every case passes
            violations = check_outcome(pool.run(case, TARGET))
            if violations:
                raise RuntimeError(f"benchmark case does not pass: {case.describe()}: {violations[0].describe()}")
        count = failed = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for case in cases:
                failed += bool(check_outcome(pool.run(case, TARGET)))
                count += 1
        rate = count / (time.perf_counter() - started)
        outcomes = [pool.run(case, TARGET) for case in cases]
        started = time.perf_counter()
        for _ in range(5):
            for outcome in outcomes:
                check_outcome(outcome)
        check_s = (time.perf_counter() - started) / (5 * len(outcomes))
        row = Row(sec, f"W={world} pool.run + check_outcome, {len(cases)} varied cases, {seconds:.0f} s loop",
                  f"{rate:.0f} cases/s ({count} cases, {failed} failed; check_outcome alone {_ms(check_s)}/case)")
        if world == 2:
            row.target, row.verdict = f">= {TARGET_RATE_W2:.0f}/s", _verdict(rate >= TARGET_RATE_W2)
        rows.append(row)
    rows += _bench_hypothesis(pool, hyp_examples)
    return rows


def _bench_hypothesis(pool, max_examples: int) -> list[Row]:
    sec = "3 throughput"
    name = f"W=2 run_check({TARGET}, grad=none), max_examples={max_examples}"
    try:
        from harness import strategies

        strategies.cases  # noqa: B018
        from harness.core.contract import Contract
        from harness.pool import capabilities
        from harness.search.engine import run_check
        from harness.settings import profiles
    except (ImportError, AttributeError) as exc:
        return [Row(sec, name, f"skipped: strategies not available ({type(exc).__name__}: {exc})")]
    from hypothesis import given, settings

    started = time.perf_counter()
    caps = capabilities.measure(pool, "gloo", "cpu")
    measure_s = time.perf_counter() - started
    profiles.register()
    base = settings(settings.get_profile("ci"), database=None)  # no example database writes
    contract = Contract(grad="none", world_sizes=(2, 2))

    drawn = 0

    def body(case) -> None:
        nonlocal drawn
        drawn += 1

    strategy = strategies.cases(contract=contract, dtypes=caps.gather_dtypes(), backend="gloo", device="cpu")
    started = time.perf_counter()
    settings(base, max_examples=max_examples)(given(strategy)(body))()
    gen_rate = drawn / (time.perf_counter() - started)

    report = run_check(TARGET, contract, max_examples=max_examples, pool=pool, base_settings=base, seed=0)
    rate = report.examples / report.elapsed_s
    return [
        Row(sec, name, f"{rate:.0f} cases/s ({report.examples} examples in {_s(report.elapsed_s)}, verdict {report.verdict})",
            f">= {TARGET_RATE_W2:.0f}/s", _verdict(rate >= TARGET_RATE_W2)),
        Row(sec, "  of which Hypothesis generation alone (same strategy, empty body)",
            f"{gen_rate:.0f} cases/s ({drawn} examples)"),
        Row(sec, "  capability measurement (once per driver, before the first run_check)", _s(measure_s)),
    ]


def bench_switching(switches: int, per_block: int) -> list[Row]:
    from harness.core.checks import check_outcome
    from harness.pool.pool import shared_pool

    sec = "4 switching W"
    pool = shared_pool()
    rows: list[Row] = []
    # (a) one live set of 4 ranks, re-grouped to the world size each case needs.
    pool.rank_set("gloo", "cpu", 4)
    walls: dict[int, list[float]] = {2: [], 4: []}
    destroy: dict[int, list[float]] = {2: [], 4: []}
    init: dict[int, list[float]] = {2: [], 4: []}
    run_id = uuid.uuid4().hex[:8]
    for i in range(switches):
        for world in (2, 4):
            started = time.perf_counter()
            values = _call_values(pool, 4, "regroup", pool.store.port, f"bench-regroup-{run_id}-{i}-w{world}/", world)
            walls[world].append(time.perf_counter() - started)
            destroy[world].append(max(v[0] for v in values))
            init[world].append(max(v[1] for v in values))
    # The set ends regrouped as 4 ranks 0..3; prove it still runs cases, then discard it.
    usable = not check_outcome(pool.run(_overhead_case(4), TARGET))
    pool.rank_set("gloo", "cpu", 4).kill()
    for world in (2, 4):
        rows.append(Row(sec, f"one set of 4, re-grouped to W={world} (destroy + init_process_group + 1 all_reduce)",
                        f"{_ms(_median(walls[world]))} per switch (slowest rank: destroy {_ms(_median(destroy[world]))},"
                        f" new group {_ms(_median(init[world]))}; median of {switches})"))
    rows.append(Row(sec, "  set still runs cases after re-grouping", "yes" if usable else "NO"))

    # (b) one warm set per world size (the pool's design): alternate W=2 and W=4 cases.
    cases = {w: _overhead_case(w) for w in (2, 4)}
    for w in (2, 4):
        pool.rank_set("gloo", "cpu", w)
        _time_runs(pool, cases[w], 10, True)
    steady: dict[int, list[float]] = {2: [], 4: []}
    alternating: dict[int, list[float]] = {2: [], 4: []}
    for _ in range(3):
        for w in (2, 4):
            steady[w] += _time_runs(pool, cases[w], per_block, True)[0]
        for _ in range(per_block):
            for w in (2, 4):
                alternating[w] += _time_runs(pool, cases[w], 1, True)[0]
    extra = statistics.mean(_median(alternating[w]) - _median(steady[w]) for w in (2, 4))
    switch_cost = statistics.mean(_median(walls[w]) for w in (2, 4))
    q = statistics.quantiles(steady[2], n=4)
    rows.append(Row(sec, "one warm set per W (the pool): alternating W=2/W=4 cases vs same-W runs",
                    f"{extra * 1e3:+.2f} ms per switch (noise: W=2 IQR {_ms(q[2] - q[0])}; "
                    f"a re-group costs {switch_cost / max(_median(steady[2]), 1e-9):.0f} W=2 cases)"))
    return rows


def leftover_rank_processes() -> int | None:
    """Live children of the forkserver (where every rank is forked), or None if unknown."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is None or not os.path.isdir("/proc"):
        return None
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            count += 1
    return count


def profile_runs(n: int) -> str:
    """cProfile ``n`` W=2 ``pool.run`` calls in the driver; the top functions by own time."""
    from harness.pool.pool import shared_pool

    pool = shared_pool()
    case = _overhead_case(2)
    _time_runs(pool, case, 10, True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        pool.run(case, TARGET)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
    return out.getvalue()


def _loadavg() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def format_table(rows: list[Row], markdown: bool) -> str:
    header = ("section", "measurement", "value", "target", "verdict")
    cells = [header] + [(r.section, r.name, r.value, r.target, r.verdict) for r in rows]
    if markdown:
        def line(c: tuple) -> str:
            return "| " + " | ".join(str(x).replace("|", "\\|") for x in c) + " |"

        return "\n".join([line(header), "|" + "|".join("---" for _ in header) + "|"] + [line(c) for c in cells[1:]])
    widths = [max(len(str(c[i])) for c in cells) for i in range(len(header))]

    def line(c: tuple) -> str:
        return "  ".join(str(x).ljust(w) for x, w in zip(c, widths)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule] + [line(c) for c in cells[1:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (whole run well under 60 s)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--profile", action="store_true", help="also cProfile 200 pool.run calls in the driver")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    args = parser.parse_args(argv)
    os.chdir(ROOT)  # ranks take the driver's cwd; targets import by name from it

    if args.quick:
        plan = dict(reps=2, spawn_reps=1, spawn_worlds=(2, 4), blocks=3, per_block=30, seconds=1.0, spawn_budget=0.0,
                    hyp=100, switches=3, alt=20)
    else:
        plan = dict(reps=5, spawn_reps=3, spawn_worlds=(2, 4), blocks=5, per_block=80, seconds=3.0, spawn_budget=15.0,
                    hyp=200, switches=10, alt=60)

    load_before = _loadavg()
    started = time.perf_counter()
    steps: list[tuple[str, Callable[[], list[Row]]]] = [
        ("cold start", lambda: bench_cold_start(plan["reps"], plan["spawn_reps"], plan["spawn_worlds"], plan["spawn_budget"])),
        ("per-case overhead", lambda: bench_overhead(plan["blocks"], plan["per_block"])),
        ("throughput", lambda: bench_throughput(plan["seconds"], plan["hyp"])),
        ("switching", lambda: bench_switching(plan["switches"], plan["alt"])),
    ]
    rows: list[Row] = []
    profile_text = ""
    from harness.pool.pool import shared_pool

    try:
        for label, step in steps:
            if args.verbose:
                print(f"[{time.perf_counter() - started:6.1f}s] {label} ...", file=sys.stderr, flush=True)
            rows += step()
        if args.profile:
            profile_text = profile_runs(200)
    finally:
        shared_pool().close()
    for child in multiprocessing.active_children():  # spawn leftovers, if any
        child.kill()
    left = leftover_rank_processes()
    rows.append(Row("end", "rank processes left after pool.close()", "unknown" if left is None else str(left),
                    "0", "—" if left is None else _verdict(left == 0)))

    total = time.perf_counter() - started
    mode = "quick" if args.quick else "default"
    print(f"gather-harness pool benchmark ({mode}; torch {torch.__version__}; {os.cpu_count()} cores; "
          f"{total:.0f} s; load average {load_before} -> {_loadavg()}; one run: ratios comparable, absolute times load-dependent)")
    print(format_table(rows, args.markdown))
    if profile_text:
        print("\ncProfile of 200 W=2 pool.run calls (driver side, by own time):")
        print(profile_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
