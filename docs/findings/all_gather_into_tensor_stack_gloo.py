"""Finding (known: pytorch#178798, fix PR #178844 open): dist.all_gather_into_tensor (and its torch
2.13 name dist.all_gather_single) with the documented "stack" output form, a (W, *x.shape) buffer,
raises "ProcessGroupGloo::allgather: invalid tensor size at index 0" on gloo (torch 2.13.0+cpu).

The docstring: the output "must be correctly sized to have one of the following forms: (i) a
concatenation of all the input tensors along the primary dimension ... (ii) a stack of all the
input tensors along the primary dimension".  The concatenation form works.
Run: timeout 60 python docs/findings/all_gather_into_tensor_stack_gloo.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, print_verdicts  # the shared launcher, beside this script


def work(rank, world):
    import warnings

    import torch.distributed as dist

    warnings.simplefilter("ignore")
    xs = [torch.arange(3.0) + 10 * r for r in range(world)]
    x = xs[rank]
    out = {}
    for name, buffer, expected in (
        ("concatenation: out (W*3,)", torch.empty(world * 3), torch.cat(xs)),
        ("stack: out (W, 3)", torch.empty(world, 3), torch.stack(xs)),
    ):
        for api in ("all_gather_into_tensor", "all_gather_single"):
            if not hasattr(dist, api):  # all_gather_single is torch 2.13's name
                continue
            try:
                getattr(dist, api)(buffer, x)
                out[f"dist.{api}, {name}"] = "OK" if torch.equal(buffer, expected) else f"WRONG {buffer.tolist()}"
            except RuntimeError as exc:
                out[f"dist.{api}, {name}"] = f"RuntimeError: {str(exc).splitlines()[0][:110]}"
    return out


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, x = arange(3) + 10 * rank")
    res = launch(work, 2)
    return conclude(print_verdicts(res, lambda rank, name, verdict: f"rank {rank}: {name:55s} expected OK, "
                                                                    f"actual: {verdict}"))


if __name__ == "__main__":
    sys.exit(main())
