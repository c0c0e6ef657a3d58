"""Finding (known: pytorch#178798, fix PR #178844 open): dist.all_gather_into_tensor (and its torch
2.13 name dist.all_gather_single) with the documented "stack" output form, a (W, *x.shape) buffer,
raises "ProcessGroupGloo::allgather: invalid tensor size at index 0" on gloo (torch 2.13.0+cpu).

The docstring: the output "must be correctly sized to have one of the following forms: (i) a
concatenation of all the input tensors along the primary dimension ... (ii) a stack of all the
input tensors along the primary dimension".  The concatenation form works.
Run: timeout 60 python docs/findings/all_gather_into_tensor_stack_gloo.py   (exit 1 = reproduced)
"""

import torch

# --- launcher: W gloo ranks on loopback, results back through a queue (torch + stdlib only) ---
import os
import socket
import sys
import time
import traceback

import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, fn, args, queue):
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        queue.put((rank, "ok", fn(rank, world, *args)))
        dist.destroy_process_group()
    except BaseException as exc:  # report it to the parent instead of dying silently
        queue.put((rank, "error", "".join(traceback.format_exception_only(type(exc), exc)).strip()))


def launch(fn, world, *args, timeout=45.0):
    """Run fn(rank, world, *args) on `world` spawned ranks; {rank: (status, value)}.

    A rank that does not report within `timeout` seconds is killed and reported as "hang".
    """
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, fn, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results, deadline = {}, time.monotonic() + timeout
    while len(results) < world and time.monotonic() < deadline:
        if not queue.empty():
            rank, status, value = queue.get()
            results[rank] = (status, value)
        elif all(not p.is_alive() for p in procs) and queue.empty():
            break
        else:
            time.sleep(0.02)
    for rank, p in enumerate(procs):
        p.join(timeout=2.0)
        if p.is_alive():  # only the processes this script started
            p.kill()
            p.join()
            results.setdefault(rank, ("hang", f"no report within {timeout:.0f} s"))
        results.setdefault(rank, ("dead", f"exit code {p.exitcode}"))
    return results


def work(rank, world):
    import warnings

    import torch.distributed as dist

    warnings.simplefilter("ignore")
    xs = [torch.arange(3.0) + 10 * r for r in range(world)]
    x = xs[rank]
    out = {}
    for name, buffer, expected in (
        ("concatenation: out (W*3,)", torch.empty(world * 3), torch.cat(xs)),
        ("stack: out (W, 3)", torch.empty(world, 3), torch.stack(xs)),
    ):
        for api in ("all_gather_into_tensor", "all_gather_single"):
            try:
                getattr(dist, api)(buffer, x)
                out[f"dist.{api}, {name}"] = "OK" if torch.equal(buffer, expected) else f"WRONG {buffer.tolist()}"
            except RuntimeError as exc:
                out[f"dist.{api}, {name}"] = f"RuntimeError: {str(exc).splitlines()[0][:110]}"
    return out


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, x = arange(3) + 10 * rank")
    res = launch(work, 2)
    reproduced = False
    for rank in sorted(res):
        status, value = res[rank]
        if status != "ok":
            print(f"rank {rank}: {status}: {value}")
            reproduced = True
            continue
        for name, verdict in value.items():
            print(f"rank {rank}: {name:55s} expected OK, actual: {verdict}")
            reproduced |= verdict != "OK"
    print("\nREPRODUCED" if reproduced else "\nnot reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
