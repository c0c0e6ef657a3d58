"""torch.compile(backend="inductor") turns a bool functional all-gather into an int64 one.

torch.distributed._functional_collectives.all_gather_tensor(x, 0, group) on a bool x returns
int64 (values 0/1, right shape) when compiled with the inductor backend; eager, and the
"aot_eager" backend, return bool. uint8 and int8 are right everywhere (controls). The script also
checks the other collectives whose inductor lowering takes an int argument besides the tensor:
funcol.broadcast (src), funcol.reduce_scatter_tensor (group_size; there the int64 sum also
changes the values: 2 where eager gives True), and the c10d in-place form
dist.all_gather_into_tensor(out, x), which Dynamo rewrites into the functional all-gather.
Every result is judged against a value computed locally (torch.cat, xs[src], an elementwise add
in the input's dtype); a case whose eager call fails is printed and not counted.

Run:  torchrun --standalone --nproc-per-node 2 repro.py      or      python repro.py   (starts 2 ranks)
Exit status: 1 = reproduced, 0 = not reproduced, 2 = could not check (see the output).
torch only; CPU, gloo; needs the C++ compiler inductor uses on CPU; about a minute. The inductor
cache and temporary files go to a temporary folder that the script removes.
"""

import os
import shutil
import sys
import tempfile

# The compile caches (TORCHINDUCTOR_CACHE_DIR) and temporary files (TMPDIR) of this run go to one
# temporary folder, set before torch is imported. Ranks started by `python repro.py` inherit the
# parent's folder (the parent removes it); under torchrun each rank makes and removes its own.
_SCRATCH_VAR = "FUNCOL_BOOL_REPRO_SCRATCH"
if os.environ.get(_SCRATCH_VAR):
    _OWN_SCRATCH = None
else:
    _OWN_SCRATCH = tempfile.mkdtemp(prefix="funcol-bool-repro-")
    os.environ.update({_SCRATCH_VAR: _OWN_SCRATCH, "TORCHINDUCTOR_CACHE_DIR": _OWN_SCRATCH,
                       "TMPDIR": _OWN_SCRATCH})
    tempfile.tempdir = None  # re-read TMPDIR
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no pool of compile workers

import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from datetime import timedelta  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as funcol  # noqa: E402

WORLD_SIZE = 2
OK, REPRODUCED, BROKEN = 0, 1, 2
DTYPES = (torch.bool, torch.uint8, torch.int8)  # uint8, int8: controls
BACKENDS = ("eager", "aot_eager", "inductor")  # "eager" here: no torch.compile at all


def local_input(rank, dtype):
    # [1, 0, 1, 1] on rank 0, [0, 1, 0, 0] on rank 1, ...: every rank's piece differs
    return torch.tensor([1, 0, 1, 1]).add(rank).remainder(2).to(dtype)


def reduce_input(rank, dtype):
    # [1, 1, 0, 0] on rank 0, [1, 1, 1, 0] on rank 1: ones meet, so a sum in int64 gives 2
    return torch.tensor([1, 1, rank % 2, 0]).to(dtype)


def collectives(world):
    """name -> (fn(x) to run, fn(xs) giving the expected result from every rank's input,
    input(rank, dtype))."""
    group = dist.group.WORLD

    def c10d_gather_into_tensor(x):
        out = torch.empty(world * x.shape[0], dtype=x.dtype)
        dist.all_gather_into_tensor(out, x)
        return out

    def added(xs):  # what a sum of the pieces gives in their own dtype (bool: logical or)
        total = xs[0].clone()
        for t in xs[1:]:
            total = total + t
        return total

    n = 4 // world
    return {
        "funcol.all_gather_tensor(x, 0, WORLD)": (
            lambda x: funcol.all_gather_tensor(x, 0, group), torch.cat, local_input),
        "dist.all_gather_into_tensor(out, x)": (c10d_gather_into_tensor, torch.cat, local_input),
        "funcol.broadcast(x, 0, WORLD)": (
            lambda x: funcol.broadcast(x, 0, group), lambda xs: xs[0], local_input),
        "funcol.reduce_scatter_tensor(x, 'sum', 0, WORLD)": (
            lambda x: funcol.reduce_scatter_tensor(x, "sum", 0, group),
            lambda xs: added(xs)[dist.get_rank() * n:(dist.get_rank() + 1) * n], reduce_input),
    }


def run_case(fn, backend, x):
    """fn(x) in eager or compiled with `backend` (fullgraph), waited on: (verdict value, traceback)."""
    if backend != "eager":
        torch._dynamo.reset()
        fn = torch.compile(fn, backend=backend, fullgraph=True)
    try:
        out = fn(x)
        return funcol.wait_tensor(out) if isinstance(out, funcol.AsyncCollectiveTensor) else out, None
    except Exception as exc:
        return f"raised {type(exc).__name__}: {(str(exc).splitlines() or ['?'])[0][:150]}", \
            traceback.format_exc()


def check(rank, world):
    """(status, entries): every collective x dtype x backend; an entry is (text, traceback or None)."""
    status, entries = OK, []
    for name, (fn, expect, make_input) in collectives(world).items():
        for dtype in DTYPES:
            xs = [make_input(r, dtype) for r in range(world)]
            expected = expect(xs)
            verdicts, tbs = {}, []
            for backend in BACKENDS:
                got, tb = run_case(fn, backend, xs[rank].clone())
                if tb is not None:
                    verdicts[backend] = got
                    tbs.append((backend, tb))
                elif got.dtype == expected.dtype and torch.equal(got, expected):
                    verdicts[backend] = "OK"
                else:
                    verdicts[backend] = f"WRONG {got.dtype} {got.tolist()}"
            text = (f"{name} {dtype}: expected {expected.dtype} {expected.tolist()}, actual: "
                    + "; ".join(f"{b}: {v}" for b, v in verdicts.items()))
            if verdicts["eager"] != "OK":  # nothing to compare with: not counted
                entries.append((text + "  [not counted: eager fails]", None))
                continue
            entries.append((text, None))
            entries.extend((f"  traceback ({b}):", tb) for b, tb in tbs)
            for backend in BACKENDS[1:]:
                verdict = verdicts[backend]
                if verdict == "OK":
                    continue
                if dtype == torch.bool and backend == "inductor" and verdict.startswith("WRONG"):
                    status = max(status, REPRODUCED)
                else:  # a control went wrong, aot_eager went wrong, or a compile raised: not this bug
                    status = BROKEN
    return status, entries


def print_reports(reports):
    """Every rank's entries in rank order; a traceback in full the first time it appears."""
    seen = set()
    for rank, (_, entries) in enumerate(reports):
        for text, tb in entries:
            if tb is None:
                print(f"[rank {rank}] {text}")
            elif tb in seen:
                print(f"[rank {rank}] {text} identical to one above")
            else:
                seen.add(tb)
                print(f"[rank {rank}] {text}\n    " + tb.rstrip().replace("\n", "\n    "))


def run_rank():
    """One rank: check, print every rank's report on rank 0, agree on one exit status."""
    warnings.simplefilter("ignore")  # deprecation notices of the funcol aliases, compile notices
    dist.init_process_group("gloo", timeout=timedelta(seconds=240))  # compile skew between ranks
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        status, entries = check(rank, world)
    except Exception as exc:
        status, entries = BROKEN, [(f"unexpected {type(exc).__name__}: {exc}", traceback.format_exc())]
    reports = [None] * world
    dist.all_gather_object(reports, (status, entries))
    worst = max(s for s, _ in reports)
    if rank == 0:
        print(f"torch {torch.__version__}, backend gloo, {world} ranks; x = ([1, 0, 1, 1] + rank) % 2 "
              "as dtype (reduce-scatter: [1, 1, rank % 2, 0]); compiled with fullgraph=True; "
              "'eager' = not compiled")
        print_reports(reports)
        print({OK: "\nnot reproduced", REPRODUCED: "\nREPRODUCED", BROKEN: "\ncould not check"}[worst])
    dist.destroy_process_group()
    return worst


def exit_rank():
    """Run this rank, remove its temporary folder if it made one, leave with its status
    (skipping interpreter teardown, so that nothing after the verdict can change the status)."""
    try:
        status = run_rank()
    except Exception:
        traceback.print_exc()
        status = BROKEN
    if _OWN_SCRATCH:
        shutil.rmtree(_OWN_SCRATCH, ignore_errors=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def rank_process(rank, world, port):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    exit_rank()


def spawn_ranks(world):
    """Without torchrun: start `world` ranks the way torchrun would; the worst exit status."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=rank_process, args=(r, world, port)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 290
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            print(f"rank process {p.pid} did not finish within 290 s: killed")
            p.kill()
            p.join()
    return max(p.exitcode if p.exitcode in (OK, REPRODUCED) else BROKEN for p in procs)


if __name__ == "__main__":
    if "RANK" in os.environ:  # started by torchrun
        exit_rank()
    try:
        code = spawn_ranks(WORLD_SIZE)
    finally:
        if _OWN_SCRATCH:
            shutil.rmtree(_OWN_SCRATCH, ignore_errors=True)
    sys.exit(code)
