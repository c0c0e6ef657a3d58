"""Finding (torch 2.13.0 and 2.14.1; not on 2.4.1 or 2.8.0; fixed in 2.15.0; 2.9 to 2.12 not measured):
`_functional_collectives.all_gather_tensor(x, gather_dim, group)` (and `all_gather_single`, which it
calls in 2.13) returns a wrong shape, or raises, for a **negative** `gather_dim` when `x.shape[0] == 1`.
W=1: x (1,) with gather_dim=-1 comes back (1, 1, 1), (1, 1) as (1, 1, 1, 1), (1, 3) with -2 as (1, 1, 3);
W=2: the same calls raise "shape '[1, 4, 2]' is invalid for input of size 2" on every rank.
Not a compile bug: eager and `torch.compile` with backend "eager", "aot_eager" or "inductor", with
`fullgraph=True` or not, all agree (Dynamo traces the same Python).  1-D x of length n > 1 is right.

Cause: the view shortcut of `torch._utils._maybe_view_chunk_cat` (pytorch PR #169404) is taken when the
gathered `res.shape[0] == group_size`, i.e. `x.shape[0] == 1`, and builds the view shape from slices of an
unnormalised `gather_dim` (`shape[gather_dim + 1:]` is `shape[0:]` for -1).  Known: pytorch#194856,
fixed by PR #194865 (normalises `gather_dim`, in 2.15.0).  Positive dims and `x.shape[0] != 1` are right
(controls below).
Run: timeout 300 python docs/findings/funcol_compiled_gather_last_dim_1d.py   (exit 1 = reproduced)
"""

import os
import shutil
import sys
import tempfile

import torch
from _ranks import conclude, lacking, launch, not_applicable, reported  # the shared launcher

CASES = [((1,), -1), ((1, 1), -1), ((1, 3), -2), ((1, 3, 2), -1),  # x.shape[0] == 1, negative dim
         ((3,), -1), ((1,), 0), ((2, 3), -1), ((1, 3), 1)]  # controls
MODES = {"eager": None, "compile(backend='eager', fullgraph=True)": ("eager", True),
         "compile(backend='aot_eager', fullgraph=True)": ("aot_eager", True),
         "compile(backend='inductor', fullgraph=True)": ("inductor", True),
         "compile(backend='inductor')": ("inductor", False)}


def _error(exc):
    return f"{type(exc).__name__}: {(str(exc).splitlines() or ['?'])[0][:70]}"


def work(rank, world):
    import warnings

    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    out = {}
    for shape, dim in CASES:
        xs = [torch.arange(float(torch.Size(shape).numel())).reshape(shape) + 10 * r for r in range(world)]
        expected = torch.cat(xs, dim)
        for mode, spec in MODES.items():
            torch._dynamo.reset()
            fn = lambda t: funcol.all_gather_tensor(t, dim, dist.group.WORLD)  # noqa: E731, B023
            if spec:
                fn = torch.compile(fn, backend=spec[0], fullgraph=spec[1])
            try:
                got = funcol.wait_tensor(fn(xs[rank]))  # an AsyncCollectiveTensor in eager: wait, then read
                ok = got.shape == expected.shape and torch.equal(got, expected)
                verdict = "OK" if ok else f"WRONG shape {tuple(got.shape)}"
            except RuntimeError as exc:  # TorchRuntimeError (compile) is a RuntimeError too
                verdict = _error(exc)
            out[(shape, dim, mode)] = (tuple(expected.shape), verdict)
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
            print(f"torch {torch.__version__}, gloo, W={world}: funcol.all_gather_tensor(x, gather_dim, WORLD), "
                  "x = arange(numel).reshape(shape) + 10 * rank; expected torch.cat(xs, gather_dim)")
            res = launch(work, world, timeout=300)
            reproduced |= any(status != "ok" for status, _ in res.values())
            values = dict(reported(res))
            first = next(iter(values.values()), {})
            for key, (expected, _) in first.items():
                verdicts = {r: v[key][1] for r, v in values.items()}
                shape, dim, mode = key
                actual = " | ".join(f"rank {r}: {v}" for r, v in verdicts.items())
                print(f"  x{str(shape):9s} dim={dim:2d} {mode:44s} expected {expected}, actual: {actual}")
                reproduced |= any(v != "OK" for v in verdicts.values())
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
