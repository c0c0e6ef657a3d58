"""What each catalogue variant costs: collectives, bytes sent per rank, and time, at W = 2 and 4.

    python benchmarks/variants.py [--repeats N] [--markdown]

The ranks count every ``torch.distributed`` collective a variant enters and the bytes of
this rank's payload (``harness.ranks.rank.CollectiveLog``), so the numbers are what the variant
really did, forward and backward separately.  Every variant runs the same job: equal
float32 shapes along dim 0 (the job every variant claims), plus a ragged job for the
variants that claim ragged input.  Times are medians over ``--repeats`` runs of the
forward alone (``RankResult.timings``), the slowest rank of each run.  "payload" is the
bytes of this rank's tensor handed to each collective; "wire" estimates what a rank sends
under ring algorithms (all_gather (W-1)x, reduce_scatter (W-1)/W x, all_reduce 2(W-1)/W x the
payload).  Functional collectives and ``all_gather_object`` bypass the recorded Python API:
their rows show 0.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics

from harness.core.case import Case, RankSpec
from harness.pool.pool import LocalPool
from harness.report.text import markdown_table, text_table
from harness.variants import CATALOGUE, VariantSpec

SHAPE = (64, 32)
#: Bytes a rank sends on the wire per payload byte under the ring algorithms gloo uses.
RING_FACTOR = {
    "all_gather": lambda w: w - 1, "all_gather_into_tensor": lambda w: w - 1, "all_gather_single": lambda w: w - 1,
    "_all_gather_base": lambda w: w - 1, "reduce_scatter_tensor": lambda w: (w - 1) / w,
    "all_reduce": lambda w: 2 * (w - 1) / w, "all_to_all_single": lambda w: (w - 1) / w, "broadcast": lambda w: 1,
}
_ENTRY = re.compile(r"(\w+)\(torch\.(\w+), shape=\(([\d, ]*)\)\)")


def wire_bytes(entries: list[str], world_size: int) -> int:
    """Estimated bytes one rank sends for these collectives (ring model; payload × factor)."""
    total = 0.0
    for entry in entries:
        match = _ENTRY.fullmatch(entry)
        if match is None:
            continue
        name, dtype, dims = match.groups()
        numel = math.prod(int(d) for d in dims.replace(" ", "").split(",") if d)
        itemsize = {"float32": 4, "int64": 8, "float64": 8, "int32": 4}.get(dtype, 4)
        total += numel * itemsize * RING_FACTOR.get(name, lambda w: 1)(world_size)
    return round(total)


def job(world_size: int, ragged: bool, grad: str) -> Case:
    lengths = [SHAPE[0] - 16 * (r % 2) for r in range(world_size)] if ragged else [SHAPE[0]] * world_size
    return Case(ranks=tuple(RankSpec((n, SHAPE[1])) for n in lengths), dim=0, dtype="float32", grad=grad)


def measure(pool: LocalPool, spec: VariantSpec, case: Case, repeats: int) -> dict | None:
    """Collectives/bytes of one forward (and backward), and the median forward time."""
    forward = pool.run(case.__class__(**{**case.__dict__, "grad": "none"}), spec.target, repeat=False)
    if forward.fault or forward.errors:
        return None
    w = case.world_size
    fwd = forward.results[0].collectives
    row = {"fwd_collectives": len(fwd), "fwd_bytes": max(r.bytes_sent for r in forward.results),
           "fwd_wire": max(wire_bytes(r.collectives, w) for r in forward.results)}
    if case.grad != "none":
        both = pool.run(case, spec.target, repeat=False)
        if both.fault or both.errors:
            return None
        row["bwd_collectives"] = len(both.results[0].collectives) - len(fwd)
        row["bwd_bytes"] = max(r.bytes_sent for r in both.results) - row["fwd_bytes"]
        row["bwd_wire"] = max(wire_bytes(r.collectives[len(fwd):], w) for r in both.results)
    times = []
    for _ in range(repeats):
        outcome = pool.run(case.__class__(**{**case.__dict__, "grad": "none"}), spec.target, repeat=False)
        times.append(max(r.timings["forward_s"] for r in outcome.results))
    row["fwd_ms"] = 1000 * statistics.median(times)
    return row


def rows(pool: LocalPool, repeats: int) -> list[list[str]]:
    table = []
    for ragged in (False, True):
        for spec in CATALOGUE:
            if ragged and not spec.contract.ragged:
                continue
            for world_size in (2, 4):
                grad = spec.contract.grad
                m = measure(pool, spec, job(world_size, ragged, grad), repeats)
                label = "ragged" if ragged else "equal"
                if m is None:
                    table.append([spec.name, label, str(world_size), "fails this job"] + [""] * 6)
                    continue
                table.append([spec.name, label, str(world_size), str(m["fwd_collectives"]), str(m["fwd_bytes"]),
                              str(m["fwd_wire"]), str(m.get("bwd_collectives", "-")), str(m.get("bwd_bytes", "-")),
                              str(m.get("bwd_wire", "-")), f"{m['fwd_ms']:.2f}"])
    return table


def render(table: list[list[str]], markdown: bool) -> str:
    head = ["variant", "job", "W", "fwd coll.", "fwd payload B", "fwd wire B", "bwd coll.", "bwd payload B",
            "bwd wire B", "fwd ms"]
    return (markdown_table if markdown else text_table)(head, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    with LocalPool(timeout=20) as pool:
        print(f"job: float32 {SHAPE} per rank along dim 0 (ragged: every other rank 16 rows shorter)")
        print(render(rows(pool, args.repeats), args.markdown))


if __name__ == "__main__":
    main()
