"""Finding: funcol.all_gather_single_coalesced / all_gather_into_tensor_coalesced reject complex
tensors on gloo ("RuntimeError: Invalid scalar type"), while funcol.all_gather_single and
dist.all_gather_into_tensor gather the same tensor fine (torch 2.13.0+cpu, gloo, 2 ranks).

See funcol_coalesced_complex_gloo.md.
Run: timeout 60 python docs/findings/funcol_coalesced_complex_gloo.py   (exit 1 = reproduced)
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
    import torch.distributed._functional_collectives as funcol

    warnings.simplefilter("ignore")
    xs = [torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64) * (r + 1) for r in range(world)]
    expected = torch.cat(xs)
    out = {}
    calls = {
        "funcol.all_gather_single(x, 0, WORLD)": lambda x: funcol.wait_tensor(
            funcol.all_gather_single(x, 0, dist.group.WORLD)),
        "funcol.all_gather_single_coalesced([x], WORLD)[0]": lambda x: funcol.wait_tensor(
            funcol.all_gather_single_coalesced([x], dist.group.WORLD)[0]),
        "funcol.all_gather_into_tensor_coalesced([x], WORLD)[0]": lambda x: funcol.wait_tensor(
            funcol.all_gather_into_tensor_coalesced([x], dist.group.WORLD)[0]),
    }
    for name, call in calls.items():
        try:
            got = call(xs[rank])
            out[name] = "OK" if torch.equal(got, expected) else f"WRONG {got.tolist()}"
        except RuntimeError as exc:
            out[name] = f"RuntimeError: {str(exc).splitlines()[0][:120]}"
    return {"expected": expected.tolist(), "results": out}


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, complex64 input [1+2j, 3-4j] * (rank + 1)")
    res = launch(work, 2)
    reproduced = False
    for rank in sorted(res):
        status, value = res[rank]
        if status != "ok":
            print(f"rank {rank}: {status}: {value}")
            reproduced = True
            continue
        print(f"rank {rank}: expected {value['expected']} from every call")
        for name, verdict in value["results"].items():
            print(f"   {name:58s} actual: {verdict}")
            reproduced |= verdict != "OK"
    print("\nREPRODUCED" if reproduced else "\nnot reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
