"""gloo behaviour (every torch from 2.4 to 2.15, measured): an all_gather of empty tensors returns on a
rank whose peers never enter it, and that rank is then one collective ahead: the next all_gather on the
group waits on every rank until its timeout.

Not a bug of a gather by itself (there is nothing to exchange), but it is why a rank that goes
on alone after its peers raised (a backward that fails on ranks 1..W-1 only, then further calls
on empty inputs) leaves a process group that hangs whatever runs on it next.  gather-harness
once kept such ranks for the next case and reported that hang against the next target
(``harness.pool.faults.in_step`` now compares every group's operation count before keeping ranks).
Run: timeout 60 python docs/findings/gloo_empty_all_gather_alone.py   (exit 1 = reproduced)
"""

import sys

import torch
from _ranks import conclude, launch, reported  # the shared launcher, beside this script


def work(rank, world):
    import datetime
    import time

    import torch.distributed as dist

    out = {}
    if rank == 0:
        started = time.monotonic()
        dist.all_gather([torch.empty(0) for _ in range(world)], torch.empty(0))
        out["rank 0 alone: all_gather of empty tensors"] = f"returned in {time.monotonic() - started:.3f} s"
    x = torch.full((3,), float(rank))
    parts = [torch.empty(3) for _ in range(world)]
    pending = dist.all_gather(parts, x, async_op=True)
    try:
        pending.wait(timeout=datetime.timedelta(seconds=5))
        right = torch.equal(torch.cat(parts), torch.cat([torch.full((3,), float(r)) for r in range(world)]))
        out["then every rank: all_gather of 3 floats"] = "OK" if right else f"WRONG {torch.cat(parts).tolist()}"
    except RuntimeError as exc:
        out["then every rank: all_gather of 3 floats"] = f"no answer in 5 s: {str(exc).splitlines()[0][:90]}"
    return out


def main():
    print(f"torch {torch.__version__}, backend gloo, 2 ranks; rank 0 alone gathers empty tensors first")
    res = launch(work, 2)
    reproduced = any(status != "ok" for status, _ in res.values())
    for rank, value in reported(res):
        for name, verdict in value.items():
            print(f"rank {rank}: {name:45s} {verdict}")
            reproduced |= verdict.startswith(("no answer", "WRONG"))
    return conclude(reproduced)


if __name__ == "__main__":
    sys.exit(main())
