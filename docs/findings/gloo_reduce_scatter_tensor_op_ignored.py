"""Finding (torch 2.4.1; not on 2.13.0 or 2.15.0, the releases between not measured): gloo's
`dist.reduce_scatter_tensor(out, x, op=...)` sums whatever the op: MAX, MIN and PRODUCT return the
sum, silently.  `dist.all_reduce(x, op=ReduceOp.MAX)` on the same ranks is right.

Docstring: reduce_scatter_tensor(output, input, op=<RedOpType.SUM>, ...): "Reduces, then scatters
a tensor to all ranks in a group"; op: "One of the values from torch.distributed.ReduceOp enum.
Specifies an operation used for element-wise reductions."  Cause (our reading, consistent with what
is measured): gloo had no reduce-scatter of its own before pytorch PR #149869; its
reduce_scatter_tensor(_coalesced) fallback (pytorch PR #118911) is "allreduce(inp).chunk(world_size)
[rank]", and the allreduce there is made without the caller's reduce op.  Tracker: known and
fixed, it seems: pytorch PR #171458 ("Gloo PG expand tests for different reduce ops", merged
2025-12-29) says it fixes pytorch#162338 (whose text we could not read).
Our own reduce_scatter_ragged(op="max") all-reduces instead, for this reason.
Run: timeout 90 python docs/findings/gloo_reduce_scatter_tensor_op_ignored.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, print_verdicts  # the shared launcher, beside this script

OPS = ("SUM", "MAX", "MIN", "PRODUCT")


def work(rank, world):
    import warnings

    import torch.distributed as dist

    warnings.simplefilter("ignore")  # FutureWarning on 2.13+: reduce_scatter_tensor is deprecated
    verdicts = {}
    inputs = [torch.tensor([1.0, 2.0, 3.0, 4.0]) + 10 * r for r in range(world)]
    for name in OPS:
        out = torch.empty(2)
        dist.reduce_scatter_tensor(out, inputs[rank].clone(), op=getattr(dist.ReduceOp, name))
        stacked = torch.stack(inputs).narrow(1, 2 * rank, 2)
        want = {"SUM": stacked.sum(0), "MAX": stacked.amax(0), "MIN": stacked.amin(0), "PRODUCT": stacked.prod(0)}[name]
        verdicts[name] = "OK" if torch.equal(out, want) else f"WRONG {out.tolist()}, expected {want.tolist()}"
    return verdicts


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, x = [1, 2, 3, 4] + 10*rank, slots of 2")
    results = launch(work, 2, timeout=40.0)
    return conclude(print_verdicts(results, lambda rank, name, verdict: f"   rank {rank}: op={name}: {verdict}",
                                   indent="   "))


if __name__ == "__main__":
    sys.exit(main())
