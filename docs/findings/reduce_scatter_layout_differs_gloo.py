"""Finding: on gloo, dist.reduce_scatter_tensor(out, x) (also with ReduceOp.MAX) and the list form
dist.reduce_scatter(out, list(x.split(rows))) combine the ranks' elements by their position in
memory, not by their index.  2 ranks, x of shape (4, 2), dim-0 slots of 2 rows, `out` a fresh
contiguous (2, 2) tensor in every call:

- rank 0's x contiguous, rank 1's x a transposed view (`base.t()`) of the same logical values:
  both forms return wrong values (elements paired by their position in memory);
- every rank's x the SAME transposed view: reduce_scatter_tensor is right, the list form is still
  wrong (its pieces are column-major, `out` is row-major);
- every-other-element views (`base[:, ::2]`, non-dense but row-major), on every rank or on one rank
  only beside a contiguous x: right.  What matters is the order of the strides, not density.

Expected on rank r: slot r of x_0 + x_1 (of max(x_0, x_1)), whatever the layouts.
Cause (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, no Python involved): reduce_scatter_tensor
is reduce_scatter_tensor_coalesced, which all-reduces `input.clone()` and then copies
`buffer.chunk(world)[rank]` into `out`.  clone() keeps a dense input's strides and gives a non-dense
one dense strides in the same dimension order, and gloo's allreduce adds the buffers element by
element in memory order: ranks whose stride orders differ pair different elements; the final chunk
copy is logical, so identical layouts come out right.  The list form (pytorch#149869: one allreduce
per rank) pairs each sender's piece, in its memory order, with the receiver's buffer in the order of
`out` (measured: with transposed views on both ranks and a transposed `out` it is right; with rank 0
contiguous and rank 1 transposed, a transposed `out` moves the wrong values from rank 0 to rank 1).
Same root as pytorch#192920 (gloo reads tensors as raw memory, ignoring strides), which reports
scatter/broadcast/reduce with non-dense tensors; here every tensor is dense or made dense and the
mismatch is between layouts (ranks' inputs, or pieces and `out`).  Not pytorch#130251 (funcol, CUDA:
a contiguous output for a transposed input), nor pytorch#128066 (NCCL, strided inputs), which are
its neighbours.  gloo raises nothing for any of these layouts.  torch 2.13.0+cpu, gloo; also
reproduces on 2.15.0 and 2.4.1 (there the list form is absent, "n/a", and op=MAX is summed for
every layout: reduce_scatter_tensor_coalesced did not pass its options to allreduce; fixed since).
Run: timeout 120 python docs/findings/reduce_scatter_layout_differs_gloo.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script

ROWS = 2  # each rank's slot: 2 of x's 4 rows

# Which memory layout each rank's x has; the logical values are always arange(8).reshape(4, 2) + 10 * rank.
CASES = {
    "rank 0 contiguous, rank 1 transposed view": ("contiguous", "transposed"),
    "both ranks transposed views": ("transposed", "transposed"),
    "both ranks every-other-element views": ("every-other", "every-other"),
    "rank 0 contiguous, rank 1 every-other-element view": ("contiguous", "every-other"),
}


def logical(rank):
    return torch.arange(8.0).reshape(4, 2) + 10 * rank


def laid_out(values, layout):
    """`values` with the given memory layout (same logical values)."""
    if layout == "transposed":  # strides (1, 4): a column-major (4, 2)
        return values.t().contiguous().t()
    if layout == "every-other":  # strides (4, 2): every other element of a (4, 4) row-major base
        base = torch.zeros(4, 4)
        base[:, ::2] = values
        return base[:, ::2]
    return values.clone()


def work(rank, world, layouts):
    import warnings

    import torch.distributed as dist

    warnings.simplefilter("ignore")  # FutureWarning: reduce_scatter_tensor deprecated in 2.13
    x = laid_out(logical(rank), layouts[rank])
    want = {"sum": sum(map(logical, range(world))), "max": logical(world - 1)}  # x_1 > x_0 everywhere
    calls = {
        "reduce_scatter_tensor(out, x)": ("sum", lambda out: dist.reduce_scatter_tensor(out, x)),
        "reduce_scatter_tensor(out, x, op=MAX)": (
            "max", lambda out: dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.MAX)),
        "reduce_scatter(out, list(x.split(2)))": ("sum", lambda out: dist.reduce_scatter(out, list(x.split(ROWS)))),
    }
    results = {}
    for name, (op, call) in calls.items():
        expected = want[op].split(ROWS)[rank]
        out = torch.empty(ROWS, 2)  # contiguous in every call
        try:
            call(out)
            results[name] = "OK" if torch.equal(out, expected) else f"WRONG {out.tolist()} (expected {expected.tolist()})"
        except RuntimeError as exc:
            message = str(exc).splitlines()[0]
            # older torch (2.4.1): gloo has no list-form reduce_scatter; not this finding
            results[name] = f"n/a: {message}" if "does not support reduce_scatter" in message else f"RuntimeError: {message}"
    return {"x_stride": x.stride(), "results": results}


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, x_r = arange(8).reshape(4, 2) + 10*r, "
          f"slots of {ROWS} rows, out contiguous")
    reproduced = False
    for case, layouts in CASES.items():
        print(f"\n{case}:")
        results = launch(work, 2, layouts)
        reproduced |= any(status != "ok" for status, _ in results.values())
        for rank, value in reported(results, indent="   "):
            print(f"   rank {rank}: x {layouts[rank]}, strides {value['x_stride']}")
            for name, verdict in value["results"].items():
                print(f"      {name:40s} {verdict}")
                reproduced |= not (verdict == "OK" or verdict.startswith("n/a"))
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
