"""Scope of the two funcol complex bugs: every functional collective on a complex64 tensor, on gloo.

For each collective of torch.distributed._functional_collectives (under its 2.13+ name, or its
older one), with requires_grad off and on:
  (a) y = f(x), its values, without autograd;
  (b) requires_grad; the collective completes; then y.wait();
  (c) requires_grad; the collective completes between the op's return and the wrapping of its
      result (the last rank joins late and funcol's wrapper waits first): the window of the
      intermittent "is a view and its base ... modified inplace" error.
Prints one line per collective and rank: OK, WRONG values, or the error.

Run:  torchrun --nproc-per-node 2 funcol_complex_scope.py   or   python funcol_complex_scope.py
Exit status: 1 = some collective failed, 0 = none did, 2 = could not check (see the output).
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
LATE_S = 0.5


def first_present(*names):
    """The first of `names` this torch's funcol has (newer names first)."""
    return next((n for n in names if hasattr(funcol, n)), None)


def collectives(rank, world):
    """name -> (call(x), expected result) for a 1-D complex x of 2 * world elements per rank."""
    group, n = dist.group.WORLD, 2 * world
    xs = [(torch.arange(n) + 1j * (10 + torch.arange(n))).to(torch.complex64) * (r + 1) for r in range(world)]
    rows = slice(2 * rank, 2 * rank + 2)
    total = sum(xs)
    gather, gather_c = first_present("all_gather_single", "all_gather_tensor_autograd"), first_present(
        "all_gather_single_coalesced", "all_gather_into_tensor_coalesced")
    scatter, scatter_c = first_present("reduce_scatter_single", "reduce_scatter_tensor_autograd"), first_present(
        "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced")
    splits = [2] * world
    table = {
        gather: (lambda x: getattr(funcol, gather)(x, 0, group), torch.cat(xs)),
        gather_c: (lambda x: getattr(funcol, gather_c)([x], group)[0], torch.cat(xs)),
        scatter: (lambda x: getattr(funcol, scatter)(x, "sum", 0, group), total[rows]),
        scatter_c: (lambda x: getattr(funcol, scatter_c)([x], "sum", [0], group)[0], total[rows]),
        "all_reduce": (lambda x: funcol.all_reduce(x, "sum", group), total),
        "all_reduce_coalesced": (lambda x: funcol.all_reduce_coalesced([x], "sum", group)[0], total),
        "all_to_all_single": (lambda x: funcol.all_to_all_single(x, splits, splits, group),
                              torch.cat([x[rows] for x in xs])),
        "broadcast": (lambda x: funcol.broadcast(x, 0, group), xs[0]),
        "permute_tensor": (lambda x: funcol.permute_tensor(x, list(reversed(range(world))), group),
                           xs[world - 1 - rank]),
    }
    return xs[rank], table


def waiting_first(wrap):
    """funcol's result wrapper, entered only once the collective has completed (no autograd involved)."""
    def wrapper(tensors):
        with torch.no_grad():
            for t in tensors if isinstance(tensors, list) else [tensors]:
                torch.ops._c10d_functional.wait_tensor(t)
        return wrap(tensors)
    return wrapper


def short(exc):
    """An error in a few words."""
    text = str(exc).splitlines()[0]
    if "is a view and its base" in text:
        return "RuntimeError: ... is a view and its base ... modified inplace"
    return f"{type(exc).__name__}: {text[:60]}"


def verdict(got, expected):
    return "OK" if torch.equal(got.detach(), expected) else f"WRONG {got.detach().tolist()}"


def values(call, x, expected):
    """(a)"""
    try:
        return verdict(funcol.wait_tensor(call(x)), expected)
    except Exception as exc:
        return short(exc)


def wait_after_completion(call, x, expected):
    """(b)"""
    try:
        y = call(x.clone().requires_grad_(True))
        if isinstance(y, funcol.AsyncCollectiveTensor):
            with torch.no_grad():
                y.wait()  # the collective has completed
            y = y.wait()
        return verdict(y, expected)
    except Exception as exc:
        return short(exc)


def completed_before_wrapping(call, x, expected, late):
    """(c)"""
    names = [n for n in ("_maybe_wrap_tensor", "_maybe_wrap_tensors") if hasattr(funcol, n)]
    originals = {n: getattr(funcol, n) for n in names}
    for n in names:
        setattr(funcol, n, waiting_first(originals[n]))
    if late:
        time.sleep(LATE_S)
    try:
        return verdict(funcol.wait_tensor(call(x.clone().requires_grad_(True))), expected)
    except Exception as exc:
        return short(exc)
    finally:
        for n in names:
            setattr(funcol, n, originals[n])


def check(rank, world):
    """(status, entries): (a), (b), (c) for every collective; an entry is (text, traceback or None)."""
    x, table = collectives(rank, world)
    status, entries = OK, []
    for name, (call, expected) in table.items():
        results = [values(call, x, expected)]
        dist.barrier()
        results.append(wait_after_completion(call, x, expected))
        dist.barrier()
        results.append(completed_before_wrapping(call, x, expected, late=rank == world - 1))
        dist.barrier()
        entries.append((f"{name:32s} " + " | ".join(f"({c}) {r}" for c, r in zip("abc", results)), None))
        if any(r != "OK" for r in results):
            status = REPRODUCED
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
