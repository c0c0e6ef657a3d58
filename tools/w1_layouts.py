"""Standalone: torch's gather paths at W=1 on inputs of every layout, plain torch only.

    python tools/w1_layouts.py nccl cuda     # python tools/w1_layouts.py gloo cpu

Prints one line per (path, layout): ok, wrong values (got vs expected) or the exception.
"""

import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

backend, device = sys.argv[1], sys.argv[2]
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group(backend, rank=0, world_size=1, device_id=torch.device(device, 0) if device == "cuda" else None)
base = torch.arange(24, dtype=torch.float32, device=device)
LAYOUTS = {
    "contiguous": lambda: base[:6].reshape(2, 3).clone(),
    "transposed": lambda: base[:6].reshape(3, 2).clone().t(),
    "strided": lambda: base[:12:2].reshape(2, 3),
    "offset": lambda: base[5:11].reshape(2, 3),
}


def listed(x):
    out = [torch.empty_like(x)]
    dist.all_gather(out, x)
    return torch.cat(out)


def into_tensor(x):
    out = x.new_empty((x.shape[0] * 1, *x.shape[1:]))
    dist.all_gather_into_tensor(out, x)
    return out


def stacked(x):
    out = x.new_empty((1, *x.shape))
    dist.all_gather_into_tensor(out, x)
    return out[0]


def functional(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return funcol.all_gather_tensor(x, 0, dist.group.WORLD).wait() if hasattr(funcol, "all_gather_tensor") else None


for path in (listed, into_tensor, stacked, functional):
    for name, make in LAYOUTS.items():
        x = make()
        try:
            got = path(x)
            torch.cuda.synchronize() if device == "cuda" else None
            verdict = "ok" if torch.equal(got.cpu(), x.cpu()) else f"WRONG got {got.cpu().tolist()} want {x.cpu().tolist()}"
        except Exception as exc:  # noqa: BLE001 - every outcome is printed
            verdict = f"raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
        print(f"{backend}/{device} W=1 {path.__name__:<12} {name:<11} {verdict}", flush=True)
dist.destroy_process_group()
