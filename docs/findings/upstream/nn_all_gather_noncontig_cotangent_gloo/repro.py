"""torch.distributed.nn.functional.all_gather returns a transposed gradient on gloo when a cotangent
has a permuted (e.g. transposed) layout.

Its backward on non-NCCL backends allocates the receive buffers with torch.empty_like(cotangent),
which keeps the cotangent's permuted strides, and dist.scatter on gloo writes into them as if they
were contiguous. The same backward with contiguous cotangents is correct.

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
import torch.distributed.nn.functional as dist_nn

WORLD_SIZE = 2
OK, REPRODUCED, BROKEN = 0, 1, 2


def cotangent(rank, part, transposed):
    """Rank `rank`'s cotangent for gathered part `part`: distinct small integers (exact sums)."""
    c = torch.arange(4.0).reshape(2, 2) + 100 * rank + 10 * part
    return c.t().contiguous().t() if transposed else c  # same values, strides (1, 2) when transposed


def backward_cases(rank, world):
    """label -> (backward(parts), expected x.grad): explicit cotangents, and an ordinary loss."""
    def explicit(transposed):
        return lambda parts: torch.autograd.backward(
            parts, [cotangent(rank, s, transposed) for s in range(world)])

    def through_t(parts):  # the loss reads each part transposed: its gradient comes transposed
        sum((p.t() * cotangent(rank, s, False)).sum() for s, p in enumerate(parts)).backward()

    expected = sum(cotangent(s, rank, False) for s in range(world))
    return {
        "cotangents contiguous (control)": (explicit(False), expected),
        "cotangents in transposed layout, strides (1, 2)": (explicit(True), expected),
        "loss = sum over s of (parts[s].t() * W_s).sum()": (through_t, expected.t()),
    }


def check(rank, world):
    """(status, entries): x.grad after all_gather's backward; an entry is (text, traceback or None).

    Expected: x_r.grad = sum over ranks s of the gradient rank s's loss gives to part r.
    """
    status, entries = OK, []
    for label, (backward, expected) in backward_cases(rank, world).items():
        x = (torch.arange(4.0).reshape(2, 2) + 10 * rank).requires_grad_(True)
        backward(dist_nn.all_gather(x))
        verdict = "OK" if torch.equal(x.grad, expected) else f"WRONG {x.grad.tolist()}"
        entries.append((f"dist_nn.all_gather(x) backward, {label}: "
                        f"x.grad expected {expected.tolist()}, actual {verdict}", None))
        if verdict != "OK":
            status = max(status, BROKEN if "control" in label else REPRODUCED)
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
