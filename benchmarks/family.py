"""Every planted all-reduce, split, copy and rooted (broadcast, scatter, reduce, gather-to) bug is found by every seed at the default budget and
shrinks to its smallest world; our correct ones pass every seed.

Run from the repository root::

    python benchmarks/family.py               # seeds 0-29
    python benchmarks/family.py --seeds 3

Each row is checked as ``check_gather`` binds it (``benchmarks/paths.py``'s :func:`check`: the ``ci``
profile's 100 examples, no example database, one shared pool).  The bug classes are the ones the
all-reduce's contracts exist for: an identity backward where ``sum`` is claimed, a sum counted twice,
an average without its 1/W, one bitwise reduction for another, the global rank inside a subgroup, an in-place result that never reaches
x (returned with ``async_op=True``'s handle too), a split's backward that does not gather, a split by the global rank, a copy's backward without
its all-reduce, a broadcast's backward not reduced to the source, a broadcast telling its source by the
group rank, a scatter's backward not gathering or given to every rank, a scatter telling its source
by the group rank, a reduce's backward giving each rank its own cotangent or an all-reduce's, a
reduce to an average without its 1/W, a gather-to's backward with a gather's local contract; c10d's
``dist.gather`` and ``dist.scatter`` as written (lists at the root alone) filling or sending in the wrong order.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.paths import check  # noqa: E402
from harness.pool.pool import shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402

AR = {"collective": "all-reduce"}
SCATTER = {"collective": "scatter", "grad": "adjoint"}
REDUCE = {"collective": "reduce", "grad": "adjoint"}
#: What gloo's gather moves (it raises on complex: a finding of its own, found before a planted bug).
C10D_GATHER_DTYPES = ("bool", "uint8", "int32", "int64", "float16", "float32", "float64")
#: bug class -> (target, option values, the property found, the smallest world at which it fails)
BUGS: dict[str, tuple[str, dict[str, object], str, int]] = {
    "identity backward where sum is claimed": (
        "tests.planted.family:identity_backward", {**AR, "grad": "sum"}, "gradients", 2),
    "sum counted twice where sum is claimed": (
        "tests.planted.family:double_counted_backward", {**AR, "grad": "sum"}, "gradients", 1),
    "sum where identity is claimed": (
        "tests.planted.family:double_counted_backward", {**AR, "grad": "identity"}, "gradients", 1),
    "avg without its 1/W": (
        "tests.planted.family:mean_without_division", {**AR, "op": "mean", "grad": "mean"}, "values", 2),
    "global rank in a subgroup": (
        "tests.planted.family:global_rank_in_group", {**AR, "groups": True}, "values", 2),
    "in-place result never reaching x": (
        "tests.planted.family:in_place_forgets_a_dense_copy", AR, "values", 2),
    "async in-place result never reaching x": (
        "tests.planted.family:async_forgets_a_dense_copy", AR, "values", 2),
    "bor reduced as bxor": (
        "tests.planted.family:bitwise_or_as_xor", {**AR, "op": "bor"}, "values", 2),
    "split backward not gathering": (
        "tests.planted.family:split_backward_not_gathering", {"collective": "split", "grad": "adjoint"}, "gradients",
        2),
    "split by the global rank in a subgroup": (
        "tests.planted.family:split_by_global_rank", {"collective": "split", "groups": True}, "values|shape", 2),
    "copy backward without its all-reduce": (
        "tests.planted.family:copy_without_all_reduce", {"collective": "copy", "grad": "sum"}, "gradients", 2),
    "broadcast backward not reduced to the source": (
        "tests.planted.family:broadcast_backward_not_reduced", {"collective": "broadcast", "grad": "sum"},
        "gradients", 2),
    "broadcast source told by the group rank": (
        "tests.planted.family:broadcast_source_by_group_rank", {"collective": "broadcast", "grad": "sum",
                                                                "groups": True}, "gradients", 2),
    "scatter backward not gathering": (
        "tests.planted.family:scatter_backward_not_gathering", SCATTER, "gradients", 2),
    "scatter backward on every rank": (
        "tests.planted.family:scatter_backward_everywhere", SCATTER, "gradients", 2),
    "scatter source told by the group rank": (
        "tests.planted.family:scatter_source_by_group_rank", {**SCATTER, "groups": True}, "gradients", 2),
    "reduce backward: each rank its own cotangent": (
        "tests.planted.family:reduce_backward_own", REDUCE, "gradients", 2),
    "reduce backward: an all-reduce's": (
        "tests.planted.family:reduce_backward_all_reduced", REDUCE, "gradients", 2),
    "reduce to an avg without its 1/W": (
        "tests.planted.family:reduce_mean_without_division", {"collective": "reduce", "op": "mean"}, "values", 2),
    "dist.gather as written, its list reversed": (
        "tests.planted.family:gather_list_reversed", {"collective": "gather-to", "groups": True,
                                                       "dtypes": C10D_GATHER_DTYPES}, "values", 2),
    "dist.scatter as written, its pieces rotated": (
        "tests.planted.family:scatter_list_rotated", {"collective": "scatter", "ragged": False, "groups": True},
        "values", 2),
    "gather-to backward: a gather's local": (
        "tests.planted.family:gather_to_backward_own_slot", {"collective": "gather-to", "grad": "adjoint"},
        "gradients", 2),
}
CORRECT: dict[str, tuple[str, dict[str, object]]] = {
    "ours, sum": ("harness.ragged:all_reduce_sum", {**AR, "grad": "sum"}),
    "ours, mean": ("harness.ragged:all_reduce_mean", {**AR, "op": "mean", "grad": "mean"}),
    "ours, identity": ("harness.ragged:all_reduce_identity", {**AR, "grad": "identity"}),
    "in place, dense copy written back": ("tests.planted.family:in_place_dense", AR),
    "ours, product (integers)": ("harness.ragged:all_reduce", {**AR, "op": "product", "groups": True}),
    "ours, bxor": ("harness.ragged:all_reduce", {**AR, "op": "bxor", "groups": True}),
    "async (out, handle)": ("tests.planted.family:async_pair", {**AR, "groups": True}),
    "async handle alone, or a future": ("tests.planted.family:async_in_place", {**AR, "groups": True}),
    "ours, split": ("harness.ragged:split", {"collective": "split", "grad": "adjoint"}),
    "ours, copy": ("harness.ragged:copy_to_region", {"collective": "copy", "grad": "sum"}),
    "ours, broadcast": ("harness.ragged:broadcast", {"collective": "broadcast", "grad": "sum"}),
    "ours, scatter": ("harness.ragged:scatter", SCATTER),
    "ours, reduce": ("harness.ragged:reduce", REDUCE),
    "ours, gather-to": ("harness.ragged:gather_to", {"collective": "gather-to", "grad": "adjoint"}),
    "dist.gather as written (no complex: gloo's gather raises)": (
        "torch.distributed:gather", {"collective": "gather-to", "groups": True, "dst": 1, "world_sizes": (2, 4),
                                     "dtypes": C10D_GATHER_DTYPES}),
    "dist.scatter as written, its pieces dense": (
        "tests.planted.family:scatter_dense", {"collective": "scatter", "ragged": False, "groups": True, "src": 1,
                                                "world_sizes": (2, 4)}),
    "reduce, the others returning 42s": ("tests.planted.family:reduce_others_anything", REDUCE),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds 0..N-1 (default 30)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--only", default="", help="the rows whose name holds one of these comma-separated texts "
                                                    "(default: every row)")
    args = parser.parse_args(argv)
    pool = shared_pool()
    rows, met = [], True
    wanted = args.only.split(",")
    bugs = {name: row for name, row in BUGS.items() if any(text in name for text in wanted)}
    correct = {name: row for name, row in CORRECT.items() if any(text in name for text in wanted)}
    for name, (target, values, prop, smallest) in bugs.items():
        worlds = []
        for seed in range(args.seeds):
            report = check(pool, target, seed, values).report
            found = [f for f in report.findings if f.property in prop.split("|")]
            worlds.append(found[0].case.world_size if found else None)
            print(f"{name} | seed {seed} | {found[0].case.describe() if found else 'not found'}", file=sys.stderr,
                  flush=True)
        hit = sum(1 for w in worlds if w is not None)
        at_smallest = sum(1 for w in worlds if w == smallest)
        met &= hit == at_smallest == args.seeds
        rows.append((name, prop, f"{hit}/{args.seeds}", f"{at_smallest}/{args.seeds} (W={smallest})"))
    for name, (target, values) in correct.items():
        passed = sum(1 for seed in range(args.seeds) if check(pool, target, seed, values).report.verdict == "pass")
        met &= passed == args.seeds
        rows.append((name, "-", f"passed {passed}/{args.seeds}", "-"))
    print(f"gather-harness family bug classes at the default budget (ci profile), seeds 0-{args.seeds - 1}"
          f"{', rows with ' + repr(args.only) if args.only else ''}: {'every target met' if met else 'TARGET MISSED'}")
    print((markdown_table if args.markdown else text_table)(("row", "property", "found", "shrunk to its smallest world"),
                                                            rows))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
