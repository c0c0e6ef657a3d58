"""funcol.all_gather_single_coalesced raises "Invalid scalar type" for complex tensors on gloo.

torch.distributed._functional_collectives.all_gather_single_coalesced (and its deprecated alias
all_gather_into_tensor_coalesced) fails for complex64/complex128 inputs on the gloo backend, while
all_gather_single and dist.all_gather_into_tensor gather the same tensor, and the coalesced call
gathers every real dtype.

Run:  torchrun --nproc-per-node 2 repro.py      or      python repro.py   (starts 2 ranks itself)
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


def coalesced_all_gather():
    """The coalesced all-gather under its current name (2.13+) or its older one (2.4)."""
    if hasattr(funcol, "all_gather_single_coalesced"):
        return "funcol.all_gather_single_coalesced", funcol.all_gather_single_coalesced
    return "funcol.all_gather_into_tensor_coalesced", funcol.all_gather_into_tensor_coalesced


def check(rank, world):
    """(status, entries): the coalesced call on complex64/complex128, real dtypes and c10d as controls.

    An entry is (text, traceback or None).
    """
    name, coalesced = coalesced_all_gather()
    group = dist.group.WORLD
    status, entries = OK, []
    for dtype in (torch.complex64, torch.complex128, torch.float32, torch.float64):
        values = [1 + 2j, 3 - 4j] if dtype.is_complex else [1.0, -3.0]
        xs = [torch.tensor(values, dtype=dtype) * (r + 1) for r in range(world)]
        expected = torch.cat(xs)
        tb = None
        try:
            got = funcol.wait_tensor(coalesced([xs[rank]], group)[0])
            verdict = "OK" if torch.equal(got, expected) else f"WRONG {got.tolist()}"
        except Exception as exc:
            verdict, tb = f"raised {type(exc).__name__}: {exc}", traceback.format_exc()
        entries.append((f"{name}([x], WORLD)[0], {dtype}: expected {expected.tolist()}, actual {verdict}", tb))
        if verdict != "OK":
            status = max(status, REPRODUCED if dtype.is_complex else BROKEN)
        if dtype.is_complex:  # control: c10d gathers the same complex tensor
            out = torch.empty(world * len(values), dtype=dtype)
            dist.all_gather_into_tensor(out, xs[rank])
            control = "OK" if torch.equal(out, expected) else f"WRONG {out.tolist()}"
            entries.append((f"  control dist.all_gather_into_tensor, {dtype}: {control}", None))
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
