"""funcol.all_to_all_single raises "Invalid scalar type" for complex tensors on gloo.

A sibling of the coalesced all-gather bug (same cause: the functional op hands complex tensors to
the backend, which has no complex type). Affected: funcol.all_to_all_single,
all_to_all_single_autograd and permute_tensor (built on all_to_all_single). Controls:
dist.all_to_all_single gathers the same complex tensor; funcol.all_to_all_single works for float32.

Run:  torchrun --nproc-per-node 2 sibling_all_to_all_single.py   or   python sibling_all_to_all_single.py
Exit status: 1 = reproduced, 0 = not reproduced, 2 = could not check (see the output).
torch only; CPU; about 10 s.
"""

import os
import sys
import time
import traceback
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

WORLD_SIZE = 2
OK, REPRODUCED, BROKEN = 0, 1, 2



def funcol_calls(world):
    """name -> call(x) for every funcol path that runs an all_to_all_single of x (2 rows per rank)."""
    group, splits = dist.group.WORLD, [2] * world
    return {
        "funcol.all_to_all_single(x, splits, splits, WORLD)":
            lambda x: funcol.all_to_all_single(x, splits, splits, group),
        "funcol.all_to_all_single_autograd(x, splits, splits, WORLD)":
            lambda x: funcol.all_to_all_single_autograd(x, splits, splits, group),
        "funcol.permute_tensor(x[:2], reversed ranks, WORLD)":
            lambda x: funcol.permute_tensor(x[:2], list(reversed(range(world))), group),
    }


def expected_result(name, xs, rank, world):
    """all_to_all_single: rank r receives rows 2r:2r+2 of every rank; permute_tensor: rank 1 - r's input."""
    if name.startswith("funcol.permute_tensor"):
        return xs[world - 1 - rank][:2]
    return torch.cat([x[2 * rank:2 * rank + 2] for x in xs])


def check(rank, world):
    """(status, entries): each funcol path on complex64 and float32, dist.all_to_all_single as control.

    An entry is (text, traceback or None).
    """
    status, entries = OK, []
    for dtype in (torch.complex64, torch.float32):
        values = [1 + 2j, 3 - 4j, 5 + 6j, 7 - 8j] if dtype.is_complex else [1.0, -3.0, 5.0, -7.0]
        xs = [torch.tensor(values[:2 * world], dtype=dtype) * (r + 1) for r in range(world)]
        for name, call in funcol_calls(world).items():
            expected = expected_result(name, xs, rank, world)
            tb = None
            try:
                got = funcol.wait_tensor(call(xs[rank]))
                verdict = "OK" if torch.equal(got, expected) else f"WRONG {got.tolist()}"
            except Exception as exc:
                verdict, tb = f"raised {type(exc).__name__}: {exc}", traceback.format_exc()
            entries.append((f"{name}, {dtype}: expected {expected.tolist()}, actual {verdict}", tb))
            if verdict != "OK":
                status = max(status, REPRODUCED if dtype.is_complex else BROKEN)
        out = torch.empty(2 * world, dtype=dtype)
        dist.all_to_all_single(out, xs[rank])
        control = "OK" if torch.equal(out, expected_result("", xs, rank, world)) else f"WRONG {out.tolist()}"
        entries.append((f"  control dist.all_to_all_single(out, x), {dtype}: {control}", None))
        if control != "OK":
            status = BROKEN
    return status, entries


def print_reports(reports):
    """Every rank's entries in rank order; a traceback in full the first time it appears."""
    seen = {}
    for rank, (_, entries) in enumerate(reports):
        for text, tb in entries:
            print(f"[rank {rank}] {text}")
            if tb is not None and tb in seen:
                print(f"    (traceback identical to the one under {seen[tb]})")
            elif tb is not None:
                seen[tb] = f"rank {rank}: {text.split(':')[0]}"
                print("    " + tb.rstrip().replace("\n", "\n    "))


def run_rank():
    """One rank: check, print every rank's report on rank 0, agree on one exit status."""
    warnings.simplefilter("ignore", FutureWarning)  # deprecation notices of funcol aliases
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        status, entries = check(rank, world)
    except Exception as exc:
        status, entries = BROKEN, [(f"unexpected {type(exc).__name__}: {exc}", traceback.format_exc())]
    reports = [None] * world
    dist.all_gather_object(reports, (status, entries))
    worst = max(s for s, _ in reports)
    if rank == 0:
        print(f"torch {torch.__version__}, backend gloo, {world} ranks")
        print_reports(reports)
        print({OK: "\nnot reproduced", REPRODUCED: "\nREPRODUCED", BROKEN: "\ncould not check"}[worst])
    dist.destroy_process_group()
    return worst


def exit_rank():
    """Run this rank and leave with its status, skipping interpreter teardown.

    An abort after the verdict ("terminate called without an active exception": 2 of 53 runs of
    the patched coalesced repro on torch 2.15 here, cause not found) would replace its status.
    """
    status = run_rank()
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
    deadline = time.monotonic() + 180
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            print(f"rank process {p.pid} did not finish within 180 s: killed")
            p.kill()
            p.join()
    return max(p.exitcode if p.exitcode in (OK, REPRODUCED) else BROKEN for p in procs)


if __name__ == "__main__":
    if "RANK" in os.environ:  # started by torchrun
        exit_rank()
    sys.exit(spawn_ranks(WORLD_SIZE))
