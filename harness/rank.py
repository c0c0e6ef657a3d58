"""The rank process: joins a real process group, then runs cases sent by the controller.

Like xdist's ``remote.py`` this side knows only torch, the case model and the protocol; it
never decides whether a result is right.  It reports what it saw (outputs, gradients, the
input afterwards, exceptions with tracebacks, the collectives it entered, timings) and the
controller compares.  Started from a forkserver that has imported this module (and torch)
once, so a rank is ready in tens of milliseconds.
"""

from __future__ import annotations

import ctypes
import faulthandler
import functools
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

import torch
import torch.distributed as dist

from harness import targets
from harness.case import make_cotangent, make_input
from harness.protocol import RankInit, RankResult, RunRequest, receive, send

#: Collectives recorded for "last collective entered" and for counting calls and bytes;
#: value = index of the positional argument holding this rank's payload (None: not a tensor).
RECORDED: dict[str, int | None] = {
    "all_gather": 1,
    "all_gather_into_tensor": 1,
    "_all_gather_base": 1,
    "all_gather_single": 1,
    "all_gather_object": None,
    "all_gather_coalesced": None,
    "all_reduce": 0,
    "reduce": 0,
    "broadcast": 0,
    "reduce_scatter": None,
    "reduce_scatter_tensor": 1,
    "all_to_all": None,
    "all_to_all_single": 1,
    "barrier": None,
    "gather": 0,
    "scatter": None,
    "send": 0,
    "recv": None,
    "broadcast_object_list": None,
    "gather_object": None,
    "scatter_object_list": None,
}


class CollectiveLog:
    """Records each torch.distributed collective this rank enters.

    The latest entry is mirrored into shared memory so the controller can read it while the
    rank is blocked inside the collective (the hang report names it).
    """

    def __init__(self, shared: Any) -> None:
        self.shared = shared
        self.entries: list[str] = []
        self.bytes_sent = 0
        self.latest = "(none yet)"  # what ``shared`` would read; remote ranks have no shared memory

    def reset(self) -> None:
        self.entries = []
        self.bytes_sent = 0
        self._publish("(none yet)")

    def enter(self, name: str, args: tuple, payload_index: int | None) -> None:
        payload = args[payload_index] if payload_index is not None and len(args) > payload_index else None
        described = name
        if isinstance(payload, torch.Tensor):
            self.bytes_sent += payload.numel() * payload.element_size()
            described = f"{name}({payload.dtype}, shape={tuple(payload.shape)})"
        self.entries.append(described)
        self._publish(f"#{len(self.entries)} {described}")

    def leave(self) -> None:
        self._publish(f"#{len(self.entries)} {self.entries[-1]} (returned)")

    def _publish(self, text: str) -> None:
        self.latest = text
        if self.shared is not None:
            self.shared.value = text.encode()[: len(self.shared) - 1]

    def install(self) -> None:
        for name, payload_index in RECORDED.items():
            original = getattr(dist, name, None)
            if original is not None:
                setattr(dist, name, self._wrap(name, original, payload_index))

    def _wrap(self, name: str, original: Callable, payload_index: int | None) -> Callable:
        @functools.wraps(original)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.enter(name, args, payload_index)
            result = original(*args, **kwargs)
            self.leave()
            return result

        return recorded


def main(init: RankInit, conn: Connection, last_collective: Any) -> None:
    """Entry point of a rank process (target of ``Process``)."""
    die_with_parent(init.driver_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
    _redirect_output(init.log_path)
    stack_file = open(init.stack_path, "w")
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    torch.set_num_threads(1)
    sys.path[:0] = [p for p in init.sys_path if p not in sys.path]
    os.chdir(init.cwd)
    log = CollectiveLog(last_collective)
    log.install()
    started = time.perf_counter()
    _join_group(init)
    send(conn, "ready", {"rank": init.rank, "pid": os.getpid(), "startup_s": time.perf_counter() - started})
    serve(conn, log)
    if dist.is_initialized():
        dist.destroy_process_group()
    os._exit(0)


def serve(conn: Connection, log: CollectiveLog) -> bool:
    """Answer ``run`` and ``call`` messages until ``stop`` (True) or the controller is gone (False).

    The message loop of every rank, whoever started it: pool ranks (:func:`main`) and the
    ranks torchrun starts for a remote driver (``harness.remote``) join their group their
    own way, then serve here.
    """
    handlers = {"run": functools.partial(on_run, log), "call": functools.partial(on_call, log)}
    while True:
        try:
            name, payload = receive(conn)
        except (EOFError, OSError):
            return False
        if name == "stop":
            return True
        send(conn, "result", handlers[name](payload))


def on_run(log: CollectiveLog, request: RunRequest) -> RankResult:
    """Run the target on this rank's slice of the case and report everything observed."""
    log.reset()
    rank = dist.get_rank()
    result = RankResult(rank=rank)
    phase = "setup"
    try:
        gather = targets.load(request.target)
        case = request.case
        device = case_device(case.device)
        x = make_input(case, rank, requires_grad=request.check_grad, device=device)
        stride_before = x.stride()
        phase = "forward"
        t0 = time.perf_counter()
        y = gather(x, case.dim)
        result.timings["forward_s"] = time.perf_counter() - t0
        _record_output(result, y)
        if request.check_grad:
            phase = "backward"
            result.grad = _gradient(y, x, make_cotangent(case, rank, device=device))
        if request.repeat:
            phase = "repeat"
            companion = make_input(case, rank, device=device, companion=True)
            result.companion_output = _cpu(gather(companion, case.dim))
            result.output_later = _cpu(y)
            result.repeat_output = _cpu(gather(x, case.dim))
        result.input_after = _cpu(x)
        result.input_stride_after = tuple(x.stride()) if x.stride() != stride_before else None
    except BaseException as exc:  # report everything, including SystemExit from a variant
        result.error = "".join(traceback.format_exception(exc))
        result.error_type = type(exc).__name__
        result.error_phase = phase
    finally:
        _restore_globals()
    result.collectives = list(log.entries)
    result.bytes_sent = log.bytes_sent
    return result


def on_call(log: CollectiveLog, payload: dict) -> RankResult:
    """Call a helper function on every rank (capability probes, raw benchmarks)."""
    log.reset()
    result = RankResult(rank=dist.get_rank() if dist.is_initialized() else 0)
    try:
        result.value = targets.load(payload["target"])(*payload.get("args", ()))
    except BaseException as exc:
        result.error = "".join(traceback.format_exception(exc))
        result.error_type = type(exc).__name__
        result.error_phase = "call"
    result.collectives = list(log.entries)
    return result


def _gradient(y: Any, x: torch.Tensor, cotangent: torch.Tensor) -> Any:
    if not isinstance(y, torch.Tensor) or not y.requires_grad:
        raise TypeError("the output does not require grad: the variant is not differentiable")
    (grad,) = torch.autograd.grad(y, x, cotangent, allow_unused=True)
    return None if grad is None else _cpu(grad)


def _record_output(result: RankResult, y: Any) -> None:
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"gather returned a {type(y).__name__}, not a Tensor")
    result.output_device = str(y.device)
    result.output_requires_grad = y.requires_grad
    result.output = _cpu(y)


def _cpu(t: torch.Tensor) -> torch.Tensor | None:
    """A detached CPU copy with the same strides (``clone`` preserves dense layouts).

    ``None`` for a meta tensor, which has no values: the device check reports it.
    """
    if t.device.type == "meta":
        return None
    return t.detach().to("cpu", copy=True) if t.device.type != "cpu" else t.detach().clone()


def _device(init: RankInit) -> str:
    """The GPU a pool rank is pinned to: its own with nccl (the pool checks there are enough),
    shared round-robin with gloo (one GPU can hold every rank of a gloo group)."""
    if init.device == "cuda":
        return f"cuda:{init.rank % torch.cuda.device_count()}"
    return "cpu"


def case_device(device: str) -> str:
    """Where this rank builds a case's tensors: the GPU it was pinned to when it joined."""
    return f"cuda:{torch.cuda.current_device()}" if device == "cuda" else "cpu"


def configure_nccl() -> None:
    """Make NCCL collectives fail like gloo ones; call before creating an nccl group.

    Blocking wait makes each collective call block until the GPU work is done (or raise on
    the group timeout), so "last collective entered" and stall-based desync detection mean
    the same as with gloo, and a hang is a rank sitting inside the collective call, where
    its stack shows it.  Asynchronous error handling tears the process down on an NCCL
    error the watchdog sees: a crash the pool reports, never a rank that lingers broken.
    Both are defaults only: a user's own setting wins.
    """
    os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")


def _restore_globals() -> None:
    """Undo global state a variant may leave behind so it cannot leak into the next case."""
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)


def _join_group(init: RankInit) -> None:
    if init.device == "cuda":
        torch.cuda.set_device(_device(init))
    if init.backend == "nccl":
        configure_nccl()
    store = dist.PrefixStore(
        init.store_prefix,
        dist.TCPStore(init.store_host, init.store_port, is_master=False, timeout=timedelta(seconds=60)),
    )
    dist.init_process_group(
        init.backend,
        store=store,
        rank=init.rank,
        world_size=init.world_size,
        timeout=timedelta(seconds=init.group_timeout_s),
    )


def _redirect_output(path: str) -> None:
    """Send this rank's stdout/stderr (C++ aborts included) to its log file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    faulthandler.enable(file=sys.stderr, all_threads=True)


def die_with_parent(driver_pid: int) -> None:
    """Never outlive the driver, however it ends (Ctrl-C, SIGTERM, SIGKILL of an xdist worker).

    Linux SIGKILLs this rank when its parent (the forkserver, which exits with the driver,
    or torchrun's agent for a remote rank) dies; a watchdog thread covers ``driver_pid``
    itself dying while the parent lingers.
    """
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    threading.Thread(target=_watch_driver, args=(driver_pid,), daemon=True, name="driver-watchdog").start()


def _watch_driver(driver_pid: int) -> None:
    while True:
        try:
            os.kill(driver_pid, 0)
        except ProcessLookupError:
            os._exit(1)
        time.sleep(0.5)
