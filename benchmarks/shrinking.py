"""Shrinking does not depend on the seed: each planted failure, under seeds 0-9, shrinks to one small case.

Run from the repository root::

    python benchmarks/shrinking.py             # seeds 0-9, both scenarios
    python benchmarks/shrinking.py --seeds 2   # seeds 0-1 (what the test suite runs)

Each check runs as the issue that asked for it ran it (30 examples, no example database: the
``ci`` profile, as from an empty directory) on one shared pool:

- ``AllGatherWithGrad`` with ``--groups --grad sum``: its backward indexes the stacked
  cotangent with the *global* rank, out of range on a small subgroup.  On some cases a rank
  raises while its peers wait, on others every rank returns; that race once filed the same
  failure under two properties and stopped the shrinking.  Minimal: ``W=2 groups={0}+{1}``.
- ``name_error_at_two_ranks``: raises on every case of two ranks or more, the probe's own case
  included, which was once reported as found (three elements per rank) instead of shrunk.

A row meets the target when the check fails with one finding whose case has at most
:data:`MAX_RANKS` ranks and :data:`MAX_ELEMENTS` elements per rank, and no "not fully shrunk" note.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.core.case import Case  # noqa: E402
from harness.core.contract import Contract  # noqa: E402
from harness.frontends.api import bind_contract, profile_settings  # noqa: E402
from harness.pool.pool import Pool, shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.engine import run_check  # noqa: E402
from harness.search.results import CheckReport  # noqa: E402
from harness.settings.options import resolved  # noqa: E402

MAX_RANKS = 3
MAX_ELEMENTS = 2
EXAMPLES = 30
#: name -> (target, contract)
SCENARIOS: dict[str, tuple[str, Contract]] = {
    "AllGatherWithGrad --groups --grad sum": (
        "tests.planted.conventions:AllGatherWithGrad",
        bind_contract(resolved({"ragged": False, "grad": "sum", "world_sizes": (1, 4), "groups": True}))),
    "name_error_at_two_ranks (fails on the probe's case)": (
        "tests.planted.conventions:name_error_at_two_ranks",
        bind_contract(resolved({"world_sizes": (1, 4)}))),
}


def check(pool: Pool, scenario: str, seed: int) -> CheckReport:
    """One scenario under one seed, as from an empty directory."""
    target, contract = SCENARIOS[scenario]
    return run_check(target, contract, max_examples=EXAMPLES, seed=seed, pool=pool, timeout_s=10.0,
                     base_settings=profile_settings("ci"))


def small_enough(case: Case) -> bool:
    """At most :data:`MAX_RANKS` ranks, each with at most :data:`MAX_ELEMENTS` elements."""
    return case.world_size <= MAX_RANKS and all(math.prod(spec.shape) <= MAX_ELEMENTS for spec in case.ranks)


def shrunk(report: CheckReport) -> bool:
    """One finding, small enough, and fully shrunk as far as the search says."""
    return (len(report.findings) == 1 and small_enough(report.findings[0].case)
            and not any(line.startswith("not fully shrunk") for line in report.findings[0].notes()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (default 10)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    pool = shared_pool()
    rows, met = [], 0
    for scenario in SCENARIOS:
        for seed in range(args.seeds):
            started = time.monotonic()
            report = check(pool, scenario, seed)
            ok = shrunk(report)
            met += ok
            found = "; ".join(f"{f.property}: {f.case.describe()}" for f in report.findings) or "PASS (nothing found)"
            rows.append((scenario, str(seed), found, f"{time.monotonic() - started:.1f} s", "met" if ok else "MISSED"))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ("scenario", "seed", "minimal case", "time (load-dependent)", f"<= {MAX_RANKS} ranks, <= {MAX_ELEMENTS} each")
    print(f"gather-harness shrinking: {met} of {len(rows)} checks shrunk to the target size "
          f"({EXAMPLES} examples each, no example database)")
    print((markdown_table if args.markdown else text_table)(header, rows))
    return 0 if met == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
