"""Every helper the controller has ranks run, besides cases: the rank side of its helper calls.

A rank imports the function a helper call names (:meth:`harness.pool.rankset.RankSet.call`), so
each lives here, on the rank side, and the controller names it with :func:`address`, never a string.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist

from harness.core.binding import plan_call
from harness.core.contract import ALL_DTYPES
from harness.ranks import targets
from harness.ranks.rank import case_device, configure_nccl

#: Beyond the harness's dtypes, probe the ones backends are known to reject.
PROBED_DTYPES: tuple[str, ...] = ALL_DTYPES + ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
OPS: tuple[str, ...] = ("all_gather", "all_gather_into_tensor", "all_reduce", "reduce_scatter_tensor", "all_to_all_single", "broadcast")


def address(function: Callable) -> str:
    """``module:qualname``: how a helper call names ``function`` to the ranks."""
    return f"{function.__module__}:{function.__qualname__}"


def plan_call_on_rank(target: str, needs_group: bool, kwargs: tuple[tuple[str, str], ...] = (),
                      roles: tuple[str, ...] = ()) -> dict:
    """Run on a rank: import ``target`` and plan its call (raises ``TargetError`` or ``Misfit``);
    ``roles``: what its collective binds besides dim, group, rank and world size."""
    attr = targets.split_target(target)[1].rpartition(".")[2]
    return plan_call(targets.load(target), needs_group=needs_group, kwargs=kwargs, name=attr,
                     roles=tuple(roles)).to_dict()


def join_group(backend: str, device: str, timeout_s: float, prefix: str) -> str:
    """Run on every rank (the driver's first ``call``): form the group from torchrun's environment
    and return the device the rank builds its tensors on.  Every key goes under ``prefix``, new
    for each set: torchrun keeps its store across restarts, where default keys would meet a dead
    incarnation's addresses.
    """
    if dist.is_initialized():
        raise RuntimeError("this rank is already in a process group")
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if backend == "nccl":
        configure_nccl()
    timeout = timedelta(seconds=timeout_s)
    store, rank, world_size = next(dist.rendezvous("env://", timeout=timeout))
    dist.init_process_group(backend, store=dist.PrefixStore(prefix, store), rank=rank, world_size=world_size,
                            timeout=timeout)
    return case_device(device)


def measure_capabilities(device: str = "cpu") -> dict[tuple[str, str], str]:
    """Run inside every rank: try each (dtype, op) on ``device`` tensors (support differs by device
    too) and check the values.  gloo refuses an unsupported dtype on every rank alike, before any
    communication, so a failing cell leaves the group usable (torch 2.4 to 2.15)."""
    device = case_device(device)
    cells: dict[tuple[str, str], str] = {}
    for name in PROBED_DTYPES:
        dtype = getattr(torch, name, None)
        for op in OPS:
            if dtype is None:
                cells[(name, op)] = "not in this torch"
                continue
            try:
                cells[(name, op)] = "ok" if _run_op(op, dtype, device) else "wrong values"
            except Exception as exc:  # the reason is the measurement
                cells[(name, op)] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return cells


def _filled(value: int, dtype: torch.dtype, device: str, n: int) -> torch.Tensor:
    """``n`` elements whose raw bytes all equal ``value`` (bools: its parity): exact, no casts."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    value = value % 2 if dtype == torch.bool else value
    return torch.full((n * itemsize,), value, dtype=torch.uint8, device=device).view(dtype)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def _run_op(op: str, dtype: torch.dtype, device: str) -> bool:
    world, rank = dist.get_world_size(), dist.get_rank()
    mine = _filled(rank + 1, dtype, device, 3)
    everyone = torch.cat([_filled(r + 1, dtype, device, 3) for r in range(world)])
    if op == "all_gather":
        pieces = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(pieces, mine)
        return _same(torch.cat(pieces), everyone)
    if op == "all_gather_into_tensor":
        out = torch.empty_like(everyone)
        dist.all_gather_into_tensor(out, mine)
        return _same(out, everyone)
    if op == "broadcast":
        data = mine.clone()
        dist.broadcast(data, 0)
        return _same(data, _filled(1, dtype, device, 3))
    if op == "all_to_all_single":
        out = torch.empty_like(everyone)
        dist.all_to_all_single(out, mine.repeat(world))
        return _same(out, everyone)
    data = _filled(0, dtype, device, 3 * world)  # zeros sum to zeros exactly in every dtype
    if op == "all_reduce":
        dist.all_reduce(data)
        return _same(data, _filled(0, dtype, device, 3 * world))
    out = _filled(0, dtype, device, 3)
    dist.reduce_scatter_tensor(out, data)
    return _same(out, _filled(0, dtype, device, 3))
