"""Finding (new manifestation of known root cause pytorch#192920 / #24836: gloo scatter ignores
the strides of a non-contiguous tensor): torch.distributed.nn.functional.all_gather's backward on
gloo returns a wrong gradient when a cotangent is non-contiguous (here a transposed-layout 2x2):
the gradient is read from the cotangent's raw storage, i.e. comes back transposed.
torch 2.13.0+cpu, gloo; W=1 and W=2.

Docstring: "Gathers tensors from the whole group in a list"; differentiable, the backward is a
reduce-scatter of the cotangents (grad x_r = sum over ranks s of C_s[slot r]).
Cause (torch/distributed/nn/functional.py): _AllGather.backward on non-NCCL backends builds
`tensor_list = [torch.empty_like(t) for t in grad_outputs]` (empty_like keeps the cotangent's
transposed strides) and _AlltoAll.forward fills them with `dist.scatter(out_tensor_list[i], ...)`,
which on gloo writes the received bytes contiguously into the strided output.
Run: timeout 60 python docs/findings/nn_all_gather_noncontig_cotangent_gloo.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script


def work(rank, world):
    import torch.distributed.nn.functional as dist_nn

    x = (torch.arange(4.0).reshape(2, 2) + 10 * rank).requires_grad_(True)
    parts = dist_nn.all_gather(x)
    # rank r's cotangent for part s: distinct small integers, in a transposed (column-major) layout
    cotangents = [(torch.arange(4.0).reshape(2, 2) + 100 * rank + 10 * s).t().contiguous().t() for s in range(world)]
    torch.autograd.backward(parts, cotangents)
    expected = sum(torch.arange(4.0).reshape(2, 2) + 100 * s + 10 * rank for s in range(world))
    return {"grad": x.grad.tolist(), "expected": expected.tolist(), "cotangent_stride": cotangents[0].stride()}


def main():
    reproduced = False
    for world in (1, 2):
        print(f"torch {torch.__version__}, backend gloo, {world} rank(s), x 2x2, cotangents with strides (1, 2)")
        res = launch(work, world)
        reproduced |= any(status != "ok" for status, _ in res.values())
        for rank, value in reported(res, indent="   "):
            print(f"   rank {rank}: x.grad expected {value['expected']}, actual {value['grad']}")
            reproduced |= value["grad"] != value["expected"]
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
