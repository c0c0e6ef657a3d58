"""Every path class is found by every seed at the default budget, and shrinks to its smallest world.

Run from the repository root::

    python benchmarks/paths.py               # seeds 0-29 (about 15 minutes on 2 cores)
    python benchmarks/paths.py --seeds 3
    python benchmarks/paths.py --only re-layout   # the re-layout all-to-all's classes only

Each planted bug (``tests/planted/paths.py``, plus the subgroup bug the issue measured with
``--no-ragged --grad sum --groups``) is correct everywhere but on one code path: the
equal-length fast path (wrong slot; dim 0 for ``dim``), a zero-size dim besides the gather
dim, a 3-d activation with a batch, a subgroup (the global rank inside its group).  Each is
checked as ``check_gather`` binds it, at the ``ci`` profile's default budget (100 examples, no
example database), under every seed, on one shared pool; so is our correct gather, whose rows
say what a green covered (W x dtype cells, pairs of path values) and at what speed.

A bug row meets the target when every seed finds it and every minimal case has the smallest
world size at which the bug fails at all (:data:`BUGS`).  The times are of one run on a shared
machine: compare rows of the same run only.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.frontends.api import bind, execute, prepare  # noqa: E402
from harness.pool.pool import Pool, shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.results import CheckReport, Progress  # noqa: E402

CORRECT = ("harness.ragged:all_gather_ragged", {"grad": "sum"})
#: path class -> (target, option values, the smallest world at which it fails)
BUGS: dict[str, tuple[str, dict[str, object], int]] = {
    "equal-length fast path, wrong slot": ("tests.planted.paths:equal_fast_path_wrong_slot", {"grad": "sum"}, 2),
    "equal-length fast path, dim 0 for dim": ("tests.planted.paths:equal_path_dim_swapped", {"grad": "sum"}, 2),
    "crash on a zero-size other dim": ("tests.planted.paths:zero_other_dim_crash", {"grad": "sum"}, 1),
    "wrong gradient at 3-d with a batch": ("tests.planted.paths:grad_wrong_at_3d_batch", {"grad": "sum"}, 1),
    "global rank inside a subgroup": ("tests.planted.paths:global_rank_in_group", {"grad": "sum"}, 2),
    "global rank in a group, --no-ragged --groups": (
        "tests.planted.conventions:AllGatherWithGrad", {"ragged": False, "grad": "sum", "groups": True}, 2),
    "re-layout backward repeating the forward": (
        "tests.planted.neighbours:SeqAllToAllUnswappedGrad",
        {"collective": "all-to-all", "ragged": False, "grad": "adjoint"}, 2),
    "re-layout reshape mixing batch and sequence": (
        "tests.planted.neighbours:relayout_by_reshape",
        {"collective": "all-to-all", "ragged": False, "scatter_dim": "2", "gather_dim": "1", "ndims": (4, 4)}, 2),
}


@dataclasses.dataclass
class Run:
    """One check: its report, its time, and how many examples ran before the first failing one."""

    report: CheckReport
    seconds: float
    first_failure: int | None


def check(pool: Pool, target: str, seed: int, values: dict[str, object]) -> Run:
    """One check as ``check_gather`` binds it (ci profile, no database, no repro scripts)."""
    options = dataclasses.replace(bind({"profile": "ci", "seed": seed, "timeout": 10.0, **values}, target),
                                  annotate=False)
    first: list[int] = []

    def on_example(progress: Progress) -> None:
        if not first and progress.seen and progress.seen[-1][1] is not None:
            first.append(len(progress.seen))

    started = time.monotonic()
    report = execute(options, pool, prepare(options, pool), on_example=on_example)
    return Run(report, time.monotonic() - started, first[0] if first else None)


def bug_row(name: str, runs: list[Run]) -> tuple[tuple[str, ...], bool]:
    """A table row for one planted bug over every seed, and whether it met the target."""
    _, _, smallest = BUGS[name]
    found = [run for run in runs if run.report.findings]
    worlds = [run.report.findings[0].case.world_size for run in found]
    at_smallest = sum(1 for w in worlds if w == smallest)
    cut = sum(1 for run in found if run.report.findings[0].shrink_cut)
    firsts = [run.first_failure for run in found if run.first_failure is not None]
    row = (name, f"{len(found)}/{len(runs)}", f"{at_smallest}/{len(runs)} (W={smallest})",
           ",".join(str(w) for w in sorted(set(worlds))) or "-", str(cut),
           f"{statistics.median(firsts):.0f} / {max(firsts)}" if firsts else "-",
           f"{statistics.median(run.seconds for run in runs):.1f}")
    return row, len(found) == at_smallest == len(runs)


def correct_row(runs: list[Run]) -> tuple[tuple[str, ...], bool]:
    """Our correct gather over every seed: passes, and the least any seed covered."""
    passed = sum(1 for run in runs if run.report.verdict == "pass")
    cells = min(run.report.coverage.cells_reached() for run in runs)
    pairs = min(run.report.coverage.pairs_reached() for run in runs)
    rate = statistics.median(run.report.examples / run.seconds for run in runs)
    row = (f"correct: {CORRECT[0]} --grad sum", f"passed {passed}/{len(runs)}",
           f"cells {cells[0]}/{cells[1]}, pairs {pairs[0]}/{pairs[1]} (least of any seed)", "-", "-", "-",
           f"{statistics.median(run.seconds for run in runs):.1f} ({rate:.0f} examples/s)")
    return row, passed == len(runs) and cells[0] == cells[1] and pairs[0] == pairs[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds 0..N-1 (default 30)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--only", metavar="TEXT", help="only the path classes whose name contains TEXT, and not the "
                                                      "correct gather's row")
    args = parser.parse_args(argv)
    pool = shared_pool()
    check(pool, CORRECT[0], 0, {**CORRECT[1], "max_examples": 5})  # warm every world size before timing
    rows, met = [], True
    for name, (target, values, _) in BUGS.items():
        if args.only and args.only not in name:
            continue
        runs = []
        for seed in range(args.seeds):
            runs.append(check(pool, target, seed, values))
            finding = runs[-1].report.findings[0] if runs[-1].report.findings else None
            print(f"{name} | seed {seed} | {finding.case.describe() if finding else 'not found'}", file=sys.stderr,
                  flush=True)
        row, ok = bug_row(name, runs)
        rows.append(row)
        met &= ok
    if not args.only:
        runs = [check(pool, CORRECT[0], seed, CORRECT[1]) for seed in range(args.seeds)]
        row, ok = correct_row(runs)
        rows.append(row)
        met &= ok
    header = ("path class", "found", "shrunk to its smallest world", "worlds of the minimal cases",
              "shrinks cut short", "examples to the first failure (median / max)", "s per check (median)")
    print(f"gather-harness path classes at the default budget (ci profile, 100 examples), seeds 0-{args.seeds - 1}: "
          f"{'every target met' if met else 'TARGET MISSED'}")
    print((markdown_table if args.markdown else text_table)(header, rows))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
