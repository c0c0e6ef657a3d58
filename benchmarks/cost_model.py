"""Where an example's time goes: the cost model of the search and fuzz paths, beside the raw collectives.

Run from the repository root::

    python benchmarks/cost_model.py              # W = 1, 2, 4; 200 cases each (a few minutes)
    python benchmarks/cost_model.py --quick      # 60 cases each
    python benchmarks/cost_model.py --markdown

For this project's correct ragged gather (``harness.ragged:all_gather_ragged``: one shape
exchange and one all_gather, no gradient), or with ``--gather equal`` the cheapest correct one
(``all_gather_single`` of equal shapes), at each world size, on one set of cases drawn once
and on one warm pool, every stage of an example is timed on its own:

- **draw**: Hypothesis generating the cases (``strategies.cases``, no test body);
- **reference**: the single-process expected result of every rank (``expected_output``);
- **round trip**: ``pool.run`` of a case (the request to every rank, the ranks' work, the
  results back), against **in rank**: the rank's own work alone (``procedure.run_case``: input
  recipes, the call, copies of what it observed; no pipe), and **raw**: the gather alone on the
  same inputs, back to back in the same ranks, nothing of the harness in the loop;
- **checks**: ``check_outcome`` on the round trip's outcome (its reference included);
- **1 by 1**, **check** and **fuzz**: ``run_check`` by example count, case by case (the search
  before its batches) and as ``check`` runs it (strata and Hypothesis's draws in batches judged
  on the ranks until something fails), and by a time budget with the fuzz engine's batches
  (what each slice of ``fuzz`` runs: strata, 50 Hypothesis examples, then cheaply drawn cases,
  all in batches), examples per second over the whole call, and the **rest**: the case-by-case
  search's time per example less draw, round trip and checks (Hypothesis' bookkeeping, strata,
  coverage, sampled repeat calls).

Times are medians over the cases (milliseconds); ratios are to the raw call at the same world
size, measured in the same run: compare within one run only.  A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script only benchmarks/ is on the path; ranks inherit the driver's

import torch.distributed as dist  # noqa: E402
from harness.reference import expected_output  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from harness import strategies  # noqa: E402
from harness.core.case import Case  # noqa: E402
from harness.core.checks import check_outcome  # noqa: E402
from harness.core.contract import Contract  # noqa: E402
from harness.pool import capabilities  # noqa: E402
from harness.pool.pool import LocalPool, shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.engine import run_check  # noqa: E402
from harness.search.probe import plan  # noqa: E402

#: The gathers modelled (``--gather``): this project's ragged one (a length exchange and an
#: all_gather), and the cheapest correct one (``all_gather_single`` of equal shapes: one collective).
GATHERS = {"ragged": ("harness.ragged:all_gather_ragged", True), "equal": ("harness.variants.into_tensor:gather_single", False)}
HERE = "benchmarks.cost_model"
RAW = "benchmarks.throughput:raw_calls"
#: The issue's targets: fuzz examples per second at W=1 and W=2, harness ms per example at W=1,
#: check examples per second at W=2, and there its time per example over a raw call's.
TARGET_FUZZ = {1: 1000.0, 2: 400.0}
TARGET_HARNESS_MS_W1 = 1.0
TARGET_CHECK_W2 = 200.0
TARGET_CHECK_RAW_W2 = 3.0


# -- run inside the ranks (pool.call) ----------------------------------------------------------


def in_rank(cases: list[str], target: str, call: dict) -> list[float]:
    """Seconds of this rank's own work per case: ``run_case`` as a rank runs it, without the pipe."""
    from harness.core.conventions import Call
    from harness.core.procedure import RunRequest, run_case
    from harness.ranks.targets import load

    function, planned = load(target), Call.from_dict(call)
    rank, times = dist.get_rank(), []
    for case in map(Case.from_json, cases):
        dist.barrier()
        started = time.perf_counter()
        run_case(RunRequest(case=case, target=target, call=planned, check_grad=False, repeat=False), rank, function,
                 "cpu")
        times.append(time.perf_counter() - started)
    return times


# -- the driver ----------------------------------------------------------------------------------


def drawn(contract: Contract, count: int) -> tuple[list[Case], float]:
    """``count`` cases as Hypothesis draws them for ``contract``, and the seconds per case it took."""
    cases: list[Case] = []

    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategies.cases(contract=contract))
    def keep(case: Case) -> None:
        cases.append(case)

    started = time.perf_counter()
    keep()
    return cases, (time.perf_counter() - started) / max(len(cases), 1)


def _values(pool: LocalPool, world: int, function: str, *args: object) -> list:
    """What ``function(*args)`` returned on every rank; RuntimeError naming the first rank that failed."""
    results = pool.call(world, function, *args, timeout=300)
    failed = [result for result in results if result is None or result.error]
    if failed:
        raise RuntimeError(f"{function} failed: {failed[0].error if failed[0] else 'a rank died'}")
    return [result.value for result in results]


def timed(step, items: list) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for item in items:
        started = time.perf_counter()
        step(item)
        times.append(time.perf_counter() - started)
    return times


def model(pool: LocalPool, world: int, count: int, gather: str = "ragged") -> dict[str, float]:
    """Every stage's median seconds per example at ``world`` ranks, and the two paths' rates."""
    GATHER, ragged = GATHERS[gather]  # noqa: N806
    contract = Contract(ragged=ragged, dims="any", grad="none", world_sizes=(world, world))
    run_check(GATHER, contract, max_examples=20, seed=1, pool=pool)  # warm: probe, capabilities, imports
    contract = contract.with_(dtypes=capabilities.measure(pool).drawable(contract.dtypes))  # as run_check draws
    call = plan(pool, GATHER, contract)
    cases, draw = drawn(contract, count)
    texts = [case.to_json() for case in cases]
    reference = timed(lambda case: [expected_output(case, r) for r in range(case.world_size)], cases)
    outcomes = []
    trips = timed(lambda case: outcomes.append(pool.run(case, GATHER, call=call, check_grad=False, repeat=False,
                                                        timeout=10.0)), cases)
    checks = timed(check_outcome, outcomes)
    inside = [max(per_rank) for per_rank in zip(*_values(pool, world, f"{HERE}:in_rank", texts, GATHER,
                                                            call.to_dict()))]
    raw = max(_values(pool, world, RAW, texts, 3, GATHER))
    one_by_one, search = (_per_example(GATHER, contract, pool, count, ahead=ahead) for ahead in (False, True))
    fuzzed = run_check(GATHER, contract, duration_s=10.0, seed=3, pool=pool, batches=True, ahead=True)
    row = {"draw": draw, "reference": statistics.median(reference), "round trip": statistics.median(trips),
           "in rank": statistics.median(inside), "raw": raw, "checks": statistics.median(checks),
           "one by one": one_by_one, "search": search, "fuzz": fuzzed.elapsed_s / max(fuzzed.examples, 1)}
    row["rest"] = max(0.0, one_by_one - draw - row["round trip"] - row["checks"])
    return row


def _per_example(target: str, contract: Contract, pool: LocalPool, count: int, *, ahead: bool) -> float:
    """Seconds per example of a ``count``-example search, case by case or (``ahead``, as ``check`` runs
    it) its strata and Hypothesis's draws in batches."""
    started = time.perf_counter()
    searched = run_check(target, contract, max_examples=count, seed=2, pool=pool, ahead=ahead)
    return (time.perf_counter() - started) / max(searched.examples, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 cases per world size instead of 200")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--world-sizes", default="1,2,4", metavar="LIST")
    parser.add_argument("--gather", choices=sorted(GATHERS), default="ragged",
                        help="ragged: harness.ragged's gather (default); equal: all_gather_single of equal shapes")
    args = parser.parse_args(argv)
    pool = shared_pool()
    count = 60 if args.quick else 200
    worlds = [int(w) for w in args.world_sizes.split(",")]
    rows, misses = [], []
    for world in worlds:
        row = model(pool, world, count, args.gather)
        ms = {key: value * 1000 for key, value in row.items()}
        rows.append((f"W={world}", *(f"{ms[key]:.2f}" for key in ("draw", "reference", "round trip", "in rank", "raw",
                                                                   "checks", "rest", "one by one", "search", "fuzz")),
                     f"{row['search'] / row['raw']:.1f}x", f"{1 / row['one by one']:.0f}", f"{1 / row['search']:.0f}",
                     f"{1 / row['fuzz']:.0f}"))
        if world in TARGET_FUZZ and 1 / row["fuzz"] < TARGET_FUZZ[world]:
            misses.append(f"fuzz at W={world}: {1 / row['fuzz']:.0f}/s < {TARGET_FUZZ[world]:.0f}/s")
        if world == 1 and (row["fuzz"] - row["raw"]) * 1000 > TARGET_HARNESS_MS_W1:
            misses.append(f"harness time at W=1: {(row['fuzz'] - row['raw']) * 1000:.1f} ms > {TARGET_HARNESS_MS_W1} ms")
        if world == 2 and 1 / row["search"] < TARGET_CHECK_W2:
            misses.append(f"check at W=2: {1 / row['search']:.0f}/s < {TARGET_CHECK_W2:.0f}/s")
        if world == 2 and row["search"] / row["raw"] > TARGET_CHECK_RAW_W2:
            misses.append(f"check at W=2: {row['search'] / row['raw']:.1f}x a raw call > {TARGET_CHECK_RAW_W2:g}x")
    header = ("world", "draw ms", "reference ms", "round trip ms", "in rank ms", "raw ms", "checks ms", "rest ms",
              "1 by 1 ms/ex", "check ms/ex", "fuzz ms/ex", "check / raw", "1 by 1 ex/s", "check ex/s", "fuzz ex/s")
    print(f"gather-harness cost model: {GATHERS[args.gather][0]}, {count} cases per world size, medians; one run")
    print((markdown_table if args.markdown else text_table)(header, rows))
    print("targets: " + ("every one met" if not misses else "missed: " + "; ".join(misses)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
