"""Finding: torch.distributed.nn.functional.reduce_scatter accepts pieces of different sizes (a ragged
reduce-scatter: member r's slot is input_list[r]) and returns the right values, but its backward
all-gathers the cotangents into buffers shaped like THIS member's cotangent.  With slots [3, 1] on
2 gloo ranks: the member with the short slot receives 3 values into a 1-value buffer and aborts its
process ("gloo::EnforceNotMet ... Received data size doesn't match expected size", exit -6); the
member with the long slot receives 1 value into a 3-value buffer, and autograd sums that buffer
(shape [3]) into the gradient of the 1-element piece: a silently wrong gradient made of
uninitialized memory (x.grad [1, 1, 1, nan] with torch's NaN fill of torch.empty* turned on, as
here; whatever the memory held otherwise), unless its peer's death reaches it first ("Connection
reset by peer").  torch 2.13.0+cpu, gloo.

Docstring: reduce_scatter(output, input_list, op, group): "Reduces, then scatters a list of tensors
to all processes in a group"; no equal-size restriction (dist.reduce_scatter, which it calls, does
ragged lists on gloo).  Cause (torch/distributed/nn/functional.py): _Reduce_Scatter.backward returns
_AllGather.apply(group, grad_output), whose forward gathers into
[torch.empty_like(tensor) for _ in range(world_size)]: every member's cotangent is assumed to have
this member's shape.  Expected x.grad on every member: member r's cotangent in piece r = [1, 1, 1, 2].
Run: timeout 90 python docs/findings/nn_reduce_scatter_ragged_backward_gloo.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script

SLOTS = [3, 1]  # rows of member 0's and member 1's output slot


def work(rank, world, backward):
    import warnings

    import torch.distributed as dist
    import torch.distributed.nn.functional as dist_nn

    warnings.simplefilter("ignore")  # FutureWarning: deprecated for funcol.reduce_scatter_single
    torch.use_deterministic_algorithms(True)  # with the next line: torch.empty* memory reads as NaN
    torch.utils.deterministic.fill_uninitialized_memory = True
    x = (torch.arange(4.0) + 10 * rank).requires_grad_()
    pieces = list(x.split(SLOTS))
    out = dist_nn.reduce_scatter(torch.empty_like(pieces[rank]), pieces, group=dist.group.WORLD)
    total = sum(torch.arange(4.0) + 10 * r for r in range(world))
    forward = "OK" if torch.equal(out.detach(), total.split(SLOTS)[rank]) else f"WRONG {out.tolist()}"
    if not backward:
        return forward
    cotangent = torch.full((SLOTS[rank],), float(rank + 1))  # member r's cotangent: r + 1 everywhere
    out.backward(cotangent)  # every member's x.grad should be [1, 1, 1, 2]
    expected = torch.cat([torch.full((n,), float(r + 1)) for r, n in enumerate(SLOTS)])
    return "OK" if torch.equal(x.grad, expected) else f"WRONG {x.grad.tolist()}"


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, x = arange(4) + 10*rank split into slots {SLOTS}")
    reproduced = False
    for step, backward in (("forward only", False), ("forward + backward", True)):
        print(f"{step}:")
        results = launch(work, 2, backward, timeout=40.0)
        reproduced |= any(status != "ok" for status, _ in results.values())
        for rank, verdict in reported(results, indent="   "):
            print(f"   rank {rank}: {'x.grad' if backward else 'values'} expected OK, actual: {verdict}")
            reproduced |= verdict != "OK"
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
