"""Finding (fixed upstream by pytorch#154976, "Release GIL in PG destructor", in torch 2.8): on torch
2.4 to 2.7, `dist.destroy_process_group()` right after a gloo `all_gather` can deadlock forever.

`~ProcessGroupGloo` joins the gloo worker threads while the calling thread holds the GIL.  A worker
that has just finished the `all_gather` drops its reference to the work, and with it the last
reference to an output tensor whose Python object is already gone (`del`): freeing that Python
object needs the GIL.  Neither thread can go on, and a Python watchdog thread cannot run either.

Each trial spawns 2 ranks that join a gloo group, `all_gather` into fresh tensors, drop them, and
destroy the group; a rank that gathered but has not left `destroy_process_group` 20 s later is hung
(and killed).
Seen on torch 2.4.1: the harness's repro scripts, which destroyed the group after the case, hung in
about half of the runs.
Run: timeout 600 python docs/findings/gloo_destroy_process_group_deadlock.py   (exit 1 = reproduced)
"""

import socket
import sys
import time

import torch
import torch.multiprocessing as mp

TRIALS = 12
TIMEOUT_S = 20.0  # after a rank has gathered, for destroy_process_group to return
STARTUP_S = 120.0  # for a spawned rank to import torch, join and gather (a loaded machine is slow)


def rank_main(rank, world, port, queue):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    outs = [torch.empty(4) for _ in range(world)]
    dist.all_gather(outs, torch.full((4,), float(rank)))
    del outs
    queue.put(("gathered", rank))
    dist.destroy_process_group()
    queue.put(("destroyed", rank))


def trial(ctx):
    """The ranks that gathered but never returned from destroy_process_group (None: they never gathered)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    gathered, destroyed = set(), set()
    deadline = time.monotonic() + STARTUP_S
    while len(destroyed) < len(procs) and time.monotonic() < deadline:
        while not queue.empty():
            stage, rank = queue.get()
            if stage == "gathered":  # the all_gather returned on every rank: the clock for destroy starts
                gathered.add(rank)
                deadline = min(deadline, time.monotonic() + TIMEOUT_S)
            else:
                destroyed.add(rank)
        time.sleep(0.05)
    for p in procs:  # only the processes this trial started
        if p.is_alive():
            p.kill()
        p.join()
    if len(gathered) < len(procs):
        return None
    return sorted(gathered - destroyed)


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks, all_gather then destroy_process_group, "
          f"up to {TRIALS} trials")
    ctx = mp.get_context("spawn")
    for n in range(1, TRIALS + 1):
        hung = trial(ctx)
        if hung is None:
            print(f"trial {n}: the ranks did not all gather within {STARTUP_S:.0f} s; not counted")
        elif hung:
            print(f"trial {n}: ranks {hung} gathered, then stayed inside destroy_process_group for {TIMEOUT_S:.0f} s "
                  f"(expected: every rank returns at once)")
            print("\nREPRODUCED")
            return 1
        else:
            print(f"trial {n}: every rank returned from destroy_process_group")
    print("\nnot reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
