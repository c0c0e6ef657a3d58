"""Finding: funcol.all_gather_single on a complex tensor that requires grad intermittently raises
"Output 0 of GeneratedBackwardFor__c10d_functional_all_gather_into_tensor_default is a view and its
base or another view of its base has been modified inplace" (torch 2.13.0+cpu, gloo).

Affects all_gather_single, all_gather_single_autograd and the deprecated all_gather_tensor /
all_gather_tensor_autograd (they all call all_gather_single).  Part 1 shows the mechanism
deterministically (the op's output is a view_as_complex view whose base's version counter is
bumped by the gloo worker thread after the op returned); part 2 shows the public API failing on
a fraction of calls (0.3 % to 7 % measured, timing-dependent).  See funcol_complex_autograd_view_race.md.

Run: timeout 120 python docs/findings/funcol_complex_autograd_view_race.py   (exit 1 = reproduced)
"""

import sys
import time

import torch
from _ranks import conclude, lacking, launch, not_applicable, reported  # the shared launcher, beside this script


def mechanism(rank, world):
    """The two halves of funcol.all_gather_single, with the gloo work finishing in between."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    if rank == 1:
        time.sleep(0.5)  # rank 0's collective stays in flight for a while
    x = torch.ones(2, dtype=torch.complex64, requires_grad=True)
    group_name = dist.group.WORLD.group_name
    # step 1 of all_gather_single: the op (returns at once; gloo finishes on a worker thread)
    out = torch.ops._c10d_functional.all_gather_into_tensor(x, world, group_name)
    before = out._version
    is_view = out._base is not None
    time.sleep(1.5)  # no Python op on `out` in between
    after = out._version
    # step 2 of all_gather_single: wrap the result for autograd
    try:
        funcol._wrap_tensor_autograd(out)
        error = None
    except RuntimeError as exc:
        error = str(exc).splitlines()[0]
    try:
        funcol.wait_tensor(out)  # raises the same error while grad mode is on; the work still completes
    except RuntimeError:
        pass
    return {"is_view": is_view, "version_before": before, "version_after": after, "error": error}


def public_api(rank, world, dtype_name, calls):
    """funcol.all_gather_single as users call it, many times: how many calls raise?"""
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    dtype = getattr(torch, dtype_name)
    errors, first, good = 0, None, []
    for i in range(calls):
        x = torch.full((2,), float(rank + 1), dtype=dtype, requires_grad=True)
        try:
            good.append(funcol.wait_tensor(funcol.all_gather_single(x, 0, dist.group.WORLD)))
        except RuntimeError as exc:  # raised after the collective was issued: the ranks stay in step
            errors += 1
            first = first or f"call {i}: {str(exc).splitlines()[0][:200]}"
    expected = torch.cat([torch.full((2,), float(r + 1), dtype=dtype) for r in range(world)])
    wrong = sum(not torch.equal(y.detach(), expected) for y in good)
    return {"errors": errors, "calls": calls, "first": first, "wrong_values": wrong}


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks")
    absent = lacking("torch.distributed._functional_collectives.all_gather_single",
                     "torch.distributed._functional_collectives._wrap_tensor_autograd")
    if absent:
        return not_applicable(absent)
    reproduced = False

    print("\n1) mechanism: the collective bumps the output's version counter after the op returned")
    res = launch(mechanism, 2)
    for rank, value in reported(res, indent="   "):
        print(f"   rank {rank}: output is a view (view_as_complex): {value['is_view']}; "
              f"version {value['version_before']} -> {value['version_after']} with no op in between")
        print("           expected: _wrap_tensor_autograd(out) succeeds")
        print(f"           actual:   {'succeeds' if value['error'] is None else 'RuntimeError: ' + value['error'][:160]}")
        reproduced |= value["error"] is not None

    print("\n2) public API: funcol.all_gather_single(x, 0, WORLD) with requires_grad: complex64 (300 calls per rank), float32 control (100)")
    for dtype_name, calls in (("complex64", 300), ("float32", 100)):
        res = launch(public_api, 2, dtype_name, calls)
        for rank, value in reported(res, indent=f"   {dtype_name} "):
            print(f"   {dtype_name} rank {rank}: expected 0 of {value['calls']} calls to raise, "
                  f"actual {value['errors']}" + (f" (first: {value['first']})" if value["first"] else ""))
            if dtype_name == "complex64":
                reproduced |= value["errors"] > 0
            if value["wrong_values"]:
                print(f"   {dtype_name} rank {rank}: {value['wrong_values']} calls returned wrong values")

    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
