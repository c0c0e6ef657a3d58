"""Finding (torch 2.5 to 2.8, not applicable on 2.4; fixed in 2.9, measured on every release to 2.15):
the functional all_gather, `_functional_collectives.all_gather_tensor`, and so every DTensor
redistribution to `Replicate()`, raise "RuntimeError: Invalid scalar type" on gloo for complex tensors,
which `dist.all_gather` and `dist.all_gather_into_tensor` gather fine on the same torch.

`DTensor.full_tensor()` / `redistribute(mesh, [Replicate()])` all-gather through the functional op;
it hands gloo the complex tensor itself instead of its `view_as_real` (what `dist.all_gather_into_tensor`
does), and gloo has no complex kernels.  The catalogue's `dtensor_*` rows fail on complex inputs there.
Run: timeout 60 python docs/findings/funcol_all_gather_complex_gloo.py   (exit 1 = reproduced, 2 = no such path)
"""

import sys

import torch
from _ranks import conclude, lacking, launch, not_applicable, outcomes, print_outcomes  # the shared launcher


def work(rank, world):
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard

    warnings.simplefilter("ignore")
    xs = [torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64) * (r + 1) for r in range(world)]
    expected = torch.cat(xs)
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")

    def into_tensor(x):
        out = torch.empty(world * 2, dtype=x.dtype)
        dist.all_gather_into_tensor(out, x)
        return out

    calls = {
        "dist.all_gather_into_tensor(out, x)  (control)": into_tensor,
        "funcol.all_gather_tensor(x, 0, WORLD)": lambda x: funcol.wait_tensor(
            funcol.all_gather_tensor(x, 0, dist.group.WORLD)),
        "DTensor.from_local(x, mesh, [Shard(0)]).full_tensor()": lambda x: DTensor.from_local(
            x, mesh, [Shard(0)], run_check=False).full_tensor(),
    }
    return {"expected": expected.tolist(), "results": outcomes(calls, xs[rank], expected)}


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, complex64 input [1+2j, 3-4j] * (rank + 1)")
    absent = lacking("torch.distributed.tensor.DTensor")  # the public module, torch 2.5 on
    if absent:
        return not_applicable(absent)
    return conclude(print_outcomes(launch(work, 2)))


if __name__ == "__main__":
    sys.exit(main())
