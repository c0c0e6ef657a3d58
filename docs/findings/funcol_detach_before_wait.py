"""Finding (torch 2.4 to 2.10; fixed in 2.11, measured on every release to 2.15,
docs/torch-versions.md): the functional all_gather's result, taken with `.detach()` before anything waited on
it, raises "A view was created in no_grad mode and is being modified inplace with grad mode enabled"
when the input requires grad, in some calls and not others (gloo, real dtypes, any world size).

`_functional_collectives.all_gather_tensor(x, 0, group)` (and `all_gather_tensor_autograd`) return an
`AsyncCollectiveTensor`; `.detach()` on it makes a view inside the wrapper's dispatch, and the first
op on that view waits with `wait_tensor`, an in-place op on it.  Whether it raises depends on timing.
Logging or copying gathered activations with `.detach()` is everyday code; the harness copies every
result that way, so the catalogue's `funcol_*` rows fail there on these releases.
Run: timeout 120 python docs/findings/funcol_detach_before_wait.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script

CALLS = 20


def work(rank, world):
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    out = {}
    for name in ("all_gather_tensor", "all_gather_tensor_autograd"):
        errors = []
        for n in range(CALLS):
            x = (torch.arange(float(n % 5)) + 100 * rank).requires_grad_()
            try:
                funcol.__dict__[name](x, 0, dist.group.WORLD).detach().clone()
            except RuntimeError as exc:
                errors.append(str(exc).splitlines()[0][:90])
        out[name] = errors
    return out


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks: funcol.<name>(x, 0, group).detach().clone(), "
          f"x.requires_grad, {CALLS} calls each")
    res = launch(work, 2)
    reproduced = any(status != "ok" for status, _ in res.values())
    for rank, value in reported(res):
        for name, errors in value.items():
            first = f"; first: {errors[0]}" if errors else ""
            print(f"rank {rank}: {name}: expected 0 errors, actual {len(errors)} of {CALLS}{first}")
            reproduced |= bool(errors)
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
