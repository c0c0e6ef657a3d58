"""Finding (known: pytorch#144109, fail-fast PR #191472 open): DTensor.from_local(x, mesh,
[Shard(0)], run_check=True, shape=..., stride=...) accepts local shards whose lengths are not the
torch.chunk layout (here [2, 1, 1] for a global length 4, where Shard(0) means [2, 2, 0]);
full_tensor() then SILENTLY returns wrong values (a padding zero inside, an element lost) and the
backward silently returns wrong gradients (a 2-element cotangent chunk summed into a 1-element
shard by autograd's shape reduction).  torch 2.13.0+cpu, gloo, 3 ranks.

from_local's docstring: run_check "perform[s] sanity check across ranks to check each local
tensor's meta information to ensure correctness"; shape "needs to be provided if the shape of
local_tensor are different across the ranks".  Shard's docstring: "follows the torch.chunk(dim)
semantic".  With run_check=True a non-chunk layout should raise, not give wrong answers.
Run: timeout 60 python docs/findings/dtensor_from_local_non_chunk_shards.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, lacking, launch, not_applicable, reported  # the shared launcher, beside this script

LENGTHS = [2, 1, 1]


def work(rank, world):
    import warnings

    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard

    warnings.simplefilter("ignore")
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
    xs = [torch.arange(n, dtype=torch.float32) + 10 * (r + 1) for r, n in enumerate(LENGTHS)]
    total = sum(LENGTHS)
    x = xs[rank].clone().requires_grad_(True)
    dt = DTensor.from_local(x, mesh, [Shard(0)], run_check=True, shape=torch.Size([total]), stride=(1,))
    y = dt.full_tensor()
    cotangents = [torch.arange(total, dtype=torch.float32) + 100 * r for r in range(world)]
    offset = sum(LENGTHS[:rank])
    expected_grad = cotangents[rank][offset:offset + LENGTHS[rank]]  # full_tensor's own contract: local
    try:
        y.backward(cotangents[rank])
        grad = x.grad.tolist()
    except RuntimeError as exc:
        grad = f"RuntimeError: {str(exc).splitlines()[0][:100]}"
    return {"values": y.detach().tolist(), "expected": torch.cat(xs).tolist(),
            "grad": grad, "expected_grad": expected_grad.tolist()}


def main():
    print(f"torch {torch.__version__}, backend gloo, 3 ranks, local lengths {LENGTHS} (global 4), run_check=True")
    absent = lacking("torch.distributed.tensor.DTensor")  # the public module, torch 2.5 on
    if absent:
        return not_applicable(absent)
    res = launch(work, len(LENGTHS))
    reproduced = False
    for rank, value in reported(res):
        print(f"rank {rank}: full_tensor expected {value['expected']}, actual {value['values']}")
        print(f"        x.grad     expected {value['expected_grad']}, actual {value['grad']}")
        reproduced |= value["values"] != value["expected"] or value["grad"] != value["expected_grad"]
    if reproduced:
        print("\nsilently wrong: no error from run_check=True")
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
