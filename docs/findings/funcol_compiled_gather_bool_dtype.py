"""Finding (torch 2.4.1, 2.8.0, 2.13.0, 2.14.1, 2.15.0): `torch.compile(backend="inductor")` of the functional
all_gather, `_functional_collectives.all_gather_tensor(x, 0, group)`, returns **int64** for a **bool** `x`
(values 0/1, right shape), W=1 and W=2, `fullgraph=True` or not.  Eager, and `torch.compile` with
backend "eager" or "aot_eager", return bool; uint8 and int8 are right everywhere (controls).

At fault: Inductor's lowering.  The post-grad graph is right (`all_gather_into_tensor: "b8[3]"`), but
`register_comm_lowering` (torch/_inductor/comm_lowering.py) registers the `_c10d_functional` lowerings
with `register_lowering`'s default `type_promotion_kind=DEFAULT`, so `transform_args` promotes the tensor
together with the int argument `group_size`: bool + int -> int64.  The generated wrapper copies the input
into an int64 buffer (`cpp_fused_all_gather_into_tensor_0`), gathers that, and returns it; its
`assert_size_stride` does not check dtypes (code read on 2.13.0).  No tracker issue found.
Run: timeout 300 python docs/findings/funcol_compiled_gather_bool_dtype.py   (exit 1 = reproduced)
"""

import os
import shutil
import sys
import tempfile

import torch
from _ranks import conclude, lacking, launch, not_applicable, reported  # the shared launcher

DTYPES = ["bool", "uint8", "int8"]  # uint8, int8: controls
MODES = {"eager": None, "compile(backend='eager', fullgraph=True)": ("eager", True),
         "compile(backend='aot_eager', fullgraph=True)": ("aot_eager", True),
         "compile(backend='inductor', fullgraph=True)": ("inductor", True),
         "compile(backend='inductor')": ("inductor", False)}


def work(rank, world):
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    out = {}
    for name in DTYPES:
        xs = [torch.tensor([1, 0, 1]).add(r).remainder(2).to(getattr(torch, name)) for r in range(world)]
        expected = torch.cat(xs)
        for mode, spec in MODES.items():
            torch._dynamo.reset()
            fn = lambda t: funcol.all_gather_tensor(t, 0, dist.group.WORLD)  # noqa: E731
            if spec:
                fn = torch.compile(fn, backend=spec[0], fullgraph=spec[1])
            try:
                got = funcol.wait_tensor(fn(xs[rank]))  # an AsyncCollectiveTensor in eager: wait, then read
                ok = got.dtype == expected.dtype and torch.equal(got, expected)
                verdict = "OK" if ok else f"WRONG {got.dtype} {got.tolist()}"
            except RuntimeError as exc:
                verdict = f"{type(exc).__name__}: {(str(exc).splitlines() or ['?'])[0][:70]}"
            out[(name, mode)] = (f"{expected.dtype} {expected.tolist()}", verdict)
    return out


def main():
    absent = lacking("torch.distributed._functional_collectives.all_gather_tensor", "torch.compile")
    if absent:
        return not_applicable(absent)
    cache = tempfile.mkdtemp(prefix="inductor-cache-")  # the ranks' compile caches, removed at the end
    os.environ.update(TORCHINDUCTOR_CACHE_DIR=cache, TMPDIR=cache, TORCHINDUCTOR_COMPILE_THREADS="1")
    reproduced = False
    try:
        for world in (1, 2):
            print(f"torch {torch.__version__}, gloo, W={world}: funcol.all_gather_tensor(x, 0, WORLD), "
                  "x = ([1, 0, 1] + rank) % 2 as dtype; expected torch.cat(xs)")
            res = launch(work, world, timeout=300)
            reproduced |= any(status != "ok" for status, _ in res.values())
            values = dict(reported(res))
            for key, (expected, _) in next(iter(values.values()), {}).items():
                verdicts = {r: v[key][1] for r, v in values.items()}
                actual = " | ".join(f"rank {r}: {v}" for r, v in verdicts.items())
                print(f"  {key[0]:5s} {key[1]:44s} expected {expected}, actual: {actual}")
                reproduced |= any(v != "OK" for v in verdicts.values())
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
