"""The launcher every finding script here shares: W gloo ranks on loopback, results back through a queue.

torch and the standard library only, so a script and this file are all a torch issue needs:
``launch(fn, world, *args)`` runs ``fn(rank, world, *args)`` on ``world`` spawned ranks.
"""

import socket
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


def reported(results, indent=""):
    """Each rank that reported, as (rank, value); the others' status (an error, a hang) is printed."""
    for rank in sorted(results):
        status, value = results[rank]
        if status == "ok":
            yield rank, value
        else:
            print(f"{indent}rank {rank}: {status}: {value}")


def conclude(reproduced):
    """The last line and the exit status every script here ends with: 1 when the bug reproduced."""
    print("\nREPRODUCED" if reproduced else "\nnot reproduced")
    return 1 if reproduced else 0
