"""torch.distributed.nn.functional.all_gather(x, group=g): the backward on gloo raises
"ValueError: Global rank 0 is not part of group" when g's members are not global ranks 0..n-1.

On non-NCCL backends the backward runs _AlltoAll, which calls dist.scatter(out, to_send, i,
group=group) for i in range(group size): i is a rank in the group, but dist.scatter's positional
src is a global rank. With 2 processes: rank 0 gathers in group [0] (its global rank equals its
group rank: the control), rank 1 in group [1] (fails). With 3 or more processes, the group
[1, ..., W-1] is checked too. The forward is correct in every case.

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


def gather_and_backward(rank, members, group):
    """(status, entry) of all_gather(x, group) and its backward on a member of `members`."""
    me = members.index(rank)
    xs = [torch.arange(2.0) + 10 * r for r in members]
    cotangents = [torch.arange(2.0 * len(members)) + 100 * r for r in members]
    x = xs[me].clone().requires_grad_(True)
    y = torch.cat(dist_nn.all_gather(x, group=group))
    forward = "OK" if torch.equal(y.detach(), torch.cat(xs)) else f"WRONG {y.tolist()}"
    expected = sum(c[2 * me:2 * me + 2] for c in cotangents)
    tb = None
    try:
        y.backward(cotangents[me])
        backward = "OK" if torch.equal(x.grad, expected) else f"WRONG {x.grad.tolist()}"
    except Exception as exc:
        backward, tb = f"raised {type(exc).__name__}: {exc}", traceback.format_exc()
    control = members[0] == 0  # group ranks coincide with global ranks
    text = (f"group {members}{' (control)' if control else ''}: forward {forward}; "
            f"x.grad expected {expected.tolist()}, actual {backward}")
    failed = forward != "OK" or backward != "OK"
    return (BROKEN if control or forward != "OK" else REPRODUCED) if failed else OK, (text, tb)


def check(rank, world):
    """(status, entries): every rank in its own group [rank]; with 3+ ranks also [1, ..., W-1].

    An entry is (text, traceback or None). Every rank creates every group (new_group is collective).
    """
    layouts = [[r] for r in range(world)] + ([list(range(1, world))] if world >= 3 else [])
    groups = [dist.new_group(members) for members in layouts]
    status, entries = OK, []
    for members, group in zip(layouts, groups):
        if rank in members:
            case_status, entry = gather_and_backward(rank, members, group)
            status = max(status, case_status)
            entries.append(entry)
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
