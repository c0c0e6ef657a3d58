"""funcol.all_gather_single / reduce_scatter_single on a complex tensor that requires grad raise
"... is a view and its base ... has been modified inplace" (gloo).

The ops return a view_as_complex view of the buffer the collective writes; as an output of the op's
autograd Function, such a view may not have its base modified in place, yet gloo's completion copy
bumps the base's version counter. Part 1: calling .wait() on the result once the collective has
completed fails every time (all_gather_single; reduce_scatter_single, whose copy happens in the
first wait). Part 2: all_gather_single itself fails on a fraction of calls, when gloo completes
between the op's return and the wrapping of its result. Real dtypes never fail.

Run:  torchrun --nproc-per-node 2 repro.py      or      python repro.py   (starts 2 ranks itself)
Exit status: 1 = reproduced, 0 = not reproduced, 2 = could not check (see the output).
torch only; CPU; about 20 s.
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


CALLS = 200  # part 2: calls per rank and dtype
VIEW_ERROR = "is a view and its base"


def ops(world):
    """name -> (call(x), expected(xs, rank)) for the two affected collectives (2.13+ names, or 2.4's)."""
    group = dist.group.WORLD
    gather = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor_autograd
    scatter = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor_autograd
    return {
        f"funcol.{gather.__name__}(x, 0, WORLD)": (
            lambda x: gather(x, 0, group), lambda xs, rank: torch.cat(xs)),
        f"funcol.{scatter.__name__}(x, 'sum', 0, WORLD)": (
            lambda x: scatter(x, "sum", 0, group), lambda xs, rank: sum(xs).chunk(world)[rank]),
    }


def classify(exc):
    """The status an exception stands for: this bug, or something else."""
    return REPRODUCED if isinstance(exc, RuntimeError) and VIEW_ERROR in str(exc) else BROKEN


def wait_after_completion(rank, world, name, call, expected_of):
    """Part 1: y = call(x); the collective completes; y.wait(); then the backward where every rank got y."""
    xs = [torch.tensor([1 + 2j, 3 - 4j, 5 + 6j, 7 - 8j], dtype=torch.complex64) * (r + 1) for r in range(world)]
    x = xs[rank].clone().requires_grad_(True)
    expected = expected_of(xs, rank)
    y, status, tb = None, OK, None
    try:
        pending = call(x)
        with torch.no_grad():  # the collective has completed (an earlier wait, without autograd)
            pending.wait()
        y = pending.wait()
        verdict = "OK" if torch.equal(y.detach(), expected) else f"WRONG {y.detach().tolist()}"
    except Exception as exc:
        status, verdict, tb = classify(exc), f"raised {type(exc).__name__}: {exc}", traceback.format_exc()
    entries = [(f"1) y = {name}, complex64, requires_grad; the collective completes; y.wait(): "
                f"expected {expected.tolist()}, actual {verdict}", tb)]
    if verdict.startswith("WRONG"):
        status = BROKEN
    everyone = torch.tensor([0 if y is None else 1])
    dist.all_reduce(everyone, op=dist.ReduceOp.MIN)
    if everyone.item():  # a backward only where every rank has y: it is a collective
        cotangents = [(torch.arange(1, y.numel() + 1) - 1j * torch.arange(y.numel())).to(torch.complex64) * 10 ** s
                      for s in range(world)]
        y.backward(cotangents[rank])
        # all-gather: sum over ranks of their cotangents' slot for this rank; reduce-scatter (sum):
        # each rank's cotangent lands in that rank's chunk of every input
        grad_expected = (sum(c.chunk(world)[rank] for c in cotangents) if "gather" in name
                         else torch.cat(cotangents))
        grad = "OK" if torch.equal(x.grad, grad_expected) else f"WRONG {x.grad.tolist()}"
        entries.append((f"   x.grad (cotangent differs per rank): expected {grad_expected.tolist()}, "
                        f"actual {grad}", None))
        if grad != "OK":
            status = BROKEN
    return status, entries


def many_calls(rank, world, dtype):
    """Part 2: CALLS calls of the all-gather as users make them; how many fail?"""
    name, (call, expected_of) = next(iter(ops(world).items()))
    expected = torch.cat([torch.full((2,), float(r + 1), dtype=dtype) for r in range(world)])
    failed, wrong, first = 0, 0, None
    for i in range(CALLS):
        x = torch.full((2,), float(rank + 1), dtype=dtype, requires_grad=True)
        try:  # the error comes after the collective was issued: the ranks stay in step
            wrong += not torch.equal(funcol.wait_tensor(call(x)).detach(), expected)
        except Exception as exc:
            failed += 1
            if first is None:
                first = (i, exc, traceback.format_exc())
    status = OK
    if failed or wrong:
        status = REPRODUCED if dtype.is_complex and first and classify(first[1]) == REPRODUCED else BROKEN
    text = f"2) {name}, {dtype}, requires_grad: expected 0 of {CALLS} calls to fail, actual {failed}"
    if wrong:
        text += f"; {wrong} calls returned wrong values"
    if first is None:
        return status, [(text, None)]
    return status, [(f"{text} (first: call {first[0]}, {type(first[1]).__name__}: {first[1]})", first[2])]


def check(rank, world):
    """(status, entries) of both parts; an entry is (text, traceback or None)."""
    status, entries = OK, []
    for name, (call, expected_of) in ops(world).items():
        part_status, part_entries = wait_after_completion(rank, world, name, call, expected_of)
        status, entries = max(status, part_status), entries + part_entries
    for dtype in (torch.complex64, torch.float32):
        part_status, part_entries = many_calls(rank, world, dtype)
        status, entries = max(status, part_status), entries + part_entries
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
