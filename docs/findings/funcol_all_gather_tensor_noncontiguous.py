"""Finding (torch 2.4 to 2.11; fixed in 2.12, measured on every release to 2.15,
docs/torch-versions.md): the functional all_gather, `_functional_collectives.all_gather_tensor(x, 0, group)`
and `all_gather_tensor_autograd`, rejects a non-contiguous input ("AssertionError" / "Tensor must be
contiguous for all_gather_tensor" / "Expected input.is_contiguous() to be true"), and
`all_gather_tensor_autograd`'s backward rejects a non-contiguous cotangent the same way.

Neither docstring asks for contiguous tensors ("Gather tensor data across from all machines and
concatenate over gather_dim"), `dist.all_gather_into_tensor` takes them, and from torch 2.13 on
these calls return the right values and gradients.  When only some ranks hold a transposed view,
those ranks raise and the others wait in the collective: a hang.
Run: timeout 60 python docs/findings/funcol_all_gather_tensor_noncontiguous.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script


def _error(exc):
    return f"{type(exc).__name__}: {(str(exc).splitlines() or ['(no message)'])[0][:90]}"


def work(rank, world):
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    group = dist.group.WORLD
    bases = [torch.arange(6.0).reshape(3, 2) + 10 * r for r in range(world)]
    expected = torch.cat([b.t() for b in bases])  # every rank passes the transposed (2, 3) view
    out = {}
    for name in ("all_gather_tensor", "all_gather_tensor_autograd"):
        x = bases[rank].t()
        try:
            got = funcol.wait_tensor(getattr(funcol, name)(x, 0, group))
            out[f"funcol.{name}(x.t(), 0, WORLD)"] = "OK" if torch.equal(got, expected) else f"WRONG {got.tolist()}"
        except (AssertionError, RuntimeError) as exc:
            out[f"funcol.{name}(x.t(), 0, WORLD)"] = _error(exc)
    x = torch.arange(3.0).repeat(2, 1).add(rank).requires_grad_()  # contiguous (2, 3)
    cotangent = torch.arange(float(2 * world * 3)).reshape(3, 2 * world).t() + 100 * rank  # transposed
    name = "funcol.all_gather_tensor_autograd(x, 0, WORLD).backward(transposed cotangent)"
    try:
        funcol.all_gather_tensor_autograd(x, 0, group).backward(cotangent)
        out[name] = f"grad {x.grad.tolist()}"  # values judged across ranks in main()
    except (AssertionError, RuntimeError) as exc:
        out[name] = _error(exc)
    return {"results": out, "cotangent": cotangent.contiguous().tolist()}


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, transposed inputs and cotangents")
    res = launch(work, 2)
    reproduced = any(status != "ok" for status, _ in res.values())
    values = dict(reported(res))
    for rank, value in values.items():
        for name, verdict in value["results"].items():
            if verdict.startswith("grad "):  # sum contract: sum over ranks of their cotangents' slot for this rank
                slot = slice(2 * rank, 2 * rank + 2)
                expected = sum(torch.tensor(v["cotangent"])[slot] for v in values.values()).tolist()
                verdict = "OK" if verdict == f"grad {expected}" else f"WRONG {verdict}, expected {expected}"
            print(f"rank {rank}: {name:80s} expected OK, actual: {verdict}")
            reproduced |= verdict != "OK"
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
