"""What subgroups by default cost, and whether they get a fair share of the default budget.

Run from the repository root::

    python benchmarks/subgroups.py              # seeds 0-4
    python benchmarks/subgroups.py --seeds 2

Two measurements, in one run on one shared pool, each check at the default budget of the
``ci`` profile (100 examples, no example database), as ``check_gather`` binds it:

- our correct ``all_gather_ragged`` (an optional ``group``) with ``--grad sum``, once with the
  default (subgroups, since it takes a group) and once with ``--no-groups``: examples per
  second, and how many examples passed no group, the world as one group, several groups, and
  left ranks idle;
- the subgroup bug the README's contrastive flags missed (``AllGatherWithGrad``, the global
  rank inside its group) with ``--no-ragged --grad sum`` and no ``--groups``: examples until
  it was found, and the time.

The ratios are of one run on a shared machine: compare rows of the same run only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.frontends.api import bind, execute, prepare  # noqa: E402
from harness.pool.pool import Pool, shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.results import CheckReport  # noqa: E402

CORRECT = "harness.ragged:all_gather_ragged"
SUBGROUP_BUG = "tests.planted.conventions:AllGatherWithGrad"
LAYOUTS = ("world", "one group", "several groups", "idle ranks")


def check(pool: Pool, target: str, seed: int, **values: object) -> tuple[CheckReport, float]:
    """One check as ``check_gather`` binds it (ci profile, no database), with its time."""
    options = bind({"profile": "ci", "seed": seed, "timeout": 10.0, **values}, target)
    started = time.monotonic()
    report = execute(options, pool, prepare(options, pool))
    return report, time.monotonic() - started


def layouts(report: CheckReport) -> list[str]:
    """Examples per group layout (the coverage's groups axis)."""
    axis = report.coverage.axis("groups")
    return [str(axis[name].examples if name in axis else 0) for name in LAYOUTS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    pool = shared_pool()
    check(pool, CORRECT, 0, grad="sum", max_examples=5)  # warm every world size before timing
    rows, found = [], 0
    for seed in range(args.seeds):
        for label, groups in (("default (subgroups)", None), ("--no-groups", False)):
            report, seconds = check(pool, CORRECT, seed, grad="sum", groups=groups)
            rows.append((f"ours --grad sum, {label}", str(seed), report.verdict, str(report.examples),
                         f"{report.examples / seconds:.1f}", *layouts(report)))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
        report, seconds = check(pool, SUBGROUP_BUG, seed, ragged=False, grad="sum")
        first = report.findings[0] if report.findings else None
        found += first is not None and bool(first.case.groups)
        rows.append(("AllGatherWithGrad --no-ragged --grad sum", str(seed),
                     f"{report.verdict}: {first.case.describe() if first else 'not found'}",
                     str(report.examples), f"found in {seconds:.1f} s" if first else "-", *layouts(report)))
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ("check", "seed", "verdict", "examples", "examples/s", *(f"examples: {name}" for name in LAYOUTS))
    print(f"gather-harness subgroups by default: the subgroup bug found on a subgroup layout by {found} of "
          f"{args.seeds} seeds (ci profile, 100 examples, no --groups)")
    print((markdown_table if args.markdown else text_table)(header, rows))
    return 0 if found == args.seeds else 1


if __name__ == "__main__":
    sys.exit(main())
