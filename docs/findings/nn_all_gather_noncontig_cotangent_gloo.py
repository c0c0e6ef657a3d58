"""Finding (new manifestation of known root cause pytorch#192920 / #24836: gloo scatter ignores
the strides of a non-contiguous tensor): torch.distributed.nn.functional.all_gather's backward on
gloo returns a wrong gradient when a cotangent is non-contiguous (here a transposed-layout 2x2):
the gradient is read from the cotangent's raw storage, i.e. comes back transposed.
torch 2.13.0+cpu, gloo; W=1 and W=2.

Docstring: "Gathers tensors from the whole group in a list"; differentiable, the backward is a
reduce-scatter of the cotangents (grad x_r = sum over ranks s of C_s[slot r]).
Cause (torch/distributed/nn/functional.py): _AllGather.backward on non-NCCL backends builds
`tensor_list = [torch.empty_like(t) for t in grad_outputs]` (empty_like keeps the cotangent's
transposed strides) and _AlltoAll.forward fills them with `dist.scatter(out_tensor_list[i], ...)`,
which on gloo writes the received bytes contiguously into the strided output.
Run: timeout 60 python docs/findings/nn_all_gather_noncontig_cotangent_gloo.py   (exit 1 = reproduced)
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
    import torch.distributed.nn.functional as dist_nn

    x = (torch.arange(4.0).reshape(2, 2) + 10 * rank).requires_grad_(True)
    parts = dist_nn.all_gather(x)
    # rank r's cotangent for part s: distinct small integers, in a transposed (column-major) layout
    cotangents = [(torch.arange(4.0).reshape(2, 2) + 100 * rank + 10 * s).t().contiguous().t() for s in range(world)]
    torch.autograd.backward(parts, cotangents)
    expected = sum(torch.arange(4.0).reshape(2, 2) + 100 * s + 10 * rank for s in range(world))
    return {"grad": x.grad.tolist(), "expected": expected.tolist(), "cotangent_stride": cotangents[0].stride()}


def main():
    reproduced = False
    for world in (1, 2):
        print(f"torch {torch.__version__}, backend gloo, {world} rank(s), x 2x2, cotangents with strides (1, 2)")
        res = launch(work, world)
        for rank in sorted(res):
            status, value = res[rank]
            if status != "ok":
                print(f"   rank {rank}: {status}: {value}")
                reproduced = True
                continue
            print(f"   rank {rank}: x.grad expected {value['expected']}, actual {value['grad']}")
            reproduced |= value["grad"] != value["expected"]
    print("\nREPRODUCED" if reproduced else "\nnot reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
