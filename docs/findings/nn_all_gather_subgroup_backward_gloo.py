"""Finding (new manifestation of the known group-rank vs global-rank confusion in
torch.distributed.nn.functional, cf. pytorch#130515 (_Broadcast) and #91760): on gloo,
torch.distributed.nn.functional.all_gather(x, group=g) works forward but its backward raises
"ValueError: Global rank 0 is not part of group" for any subgroup whose members are not global
ranks 0..n-1 (here g = [1, 2] of 3 ranks; rank 0 idle).  torch 2.13.0+cpu, gloo.

Docstring: all_gather(tensor, group=group.WORLD): "group (ProcessGroup, optional): The process
group to work on."  Cause (torch/distributed/nn/functional.py): on non-NCCL backends the backward
runs _AlltoAll, which calls `dist.scatter(out_tensor_list[i], to_send, i, group=group)` for
i in range(group size): i is a GROUP rank, but dist.scatter's positional `src` is a GLOBAL rank
(use group_src=i).  Ranks are sorted in a group, so the first i that differs from its global
rank is never a member: every member raises (no silent wrong answer, no hang).
Run: timeout 60 python docs/findings/nn_all_gather_subgroup_backward_gloo.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script

MEMBERS = [1, 2]


def work(rank, world):
    import torch.distributed as dist
    import torch.distributed.nn.functional as dist_nn

    group = dist.new_group(MEMBERS)  # every rank creates the group
    if rank not in MEMBERS:
        return "idle"
    me = MEMBERS.index(rank)
    xs = [torch.arange(2.0) + 10 * r for r in MEMBERS]
    x = xs[me].clone().requires_grad_(True)
    y = torch.cat(dist_nn.all_gather(x, group=group))
    forward = "OK" if torch.equal(y.detach(), torch.cat(xs)) else f"WRONG {y.tolist()}"
    cotangents = [torch.arange(4.0) + 100 * s for s in range(len(MEMBERS))]
    try:
        y.backward(cotangents[me])
        backward = f"grad {x.grad.tolist()}"
    except ValueError as exc:
        backward = f"ValueError: {exc}"[:120]
    expected = sum(c[2 * me:2 * me + 2] for c in cotangents).tolist()
    return {"forward": forward, "backward": backward, "expected": f"grad {expected}"}


def main():
    print(f"torch {torch.__version__}, backend gloo, 3 ranks, group {MEMBERS}")
    res = launch(work, 3)
    reproduced = False
    for rank, value in reported(res):
        if value == "idle":
            print(f"rank {rank}: idle")
            continue
        print(f"rank {rank}: forward {value['forward']}; backward expected {value['expected']}, actual {value['backward']}")
        reproduced |= value["backward"] != value["expected"]
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
