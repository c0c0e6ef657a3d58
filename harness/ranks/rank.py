"""The rank process: joins a real process group, then runs cases sent by the controller.

It knows only torch, the core and the protocol, and reports what it saw; the controller judges.
Forked from a forkserver that has imported this module and torch, it is ready in milliseconds.
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
from collections.abc import Callable
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

import torch
import torch.distributed as dist

from harness.core.procedure import BatchRequest, BatchSummary, RankResult, RunRequest, record_error, run_case
from harness.ranks import targets
from harness.ranks.protocol import (
    BATCH_CASE,
    COMPILING,
    Entered,
    Ledger,
    RankInit,
    entry_line,
    last_entered,
    ledger_body,
    receive,
    sealed,
    send,
)

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
    "reduce_scatter_single": 1,
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


#: Collectives whose payload must have one dtype and shape on every rank of the group: a
#: difference at the same place in two ranks' sequences is a desync (gloo aborts or hangs).
SAME_PAYLOAD: frozenset[str] = frozenset({
    "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_single", "all_reduce", "reduce",
    "broadcast", "reduce_scatter_tensor", "reduce_scatter_single", "gather",
})
#: Point-to-point ops: a sender and its receiver enter different ones at the same place.
POINT_TO_POINT: frozenset[str] = frozenset({"send", "recv"})


class CollectiveLog:
    """Records each torch.distributed collective this rank enters, mirrored into shared memory
    (:func:`harness.ranks.protocol.ledger_text`) so the controller reads it while the rank is
    blocked: a hang names its collective, and a desync shows the moment both ranks entered."""

    def __init__(self, shared: Any) -> None:
        self.shared = shared  # None for remote ranks, which have no shared memory
        self.entries: list[str] = []
        self.ledger: list[Entered] = []
        self.lines: list[bytes] = []  # the ledger's entries as published (encoded once)
        self.body = ledger_body([], {})
        self.case: int | None = None  # in a batch: the index of the case this rank is on
        self.counts: dict[str, int] = {}
        self.bytes_sent = 0
        self.returned = False
        self.compiling = False

    @property
    def latest(self) -> str:
        return last_entered(Ledger(self.ledger, self.returned, self.counts))

    def text(self) -> bytes:
        return sealed(self.body, self.returned)

    def reset(self) -> None:
        self.entries, self.ledger, self.lines, self.counts, self.bytes_sent, self.returned = [], [], [], {}, 0, False
        self.case = None
        self.body = ledger_body(self.lines, self.counts)
        self._publish()

    def begin_case(self, index: int) -> None:
        """Publish that this rank now runs the batch's case ``index``: a rank that hangs or dies in a
        batch says on which case, so the controller runs that one again."""
        self.case = index
        self.body = ledger_body(self.lines, self._counted())
        self._publish()

    def _counted(self) -> dict[str, int]:
        marks = ({} if self.case is None else {BATCH_CASE: self.case}) | ({COMPILING: 1} if self.compiling else {})
        return {**self.counts, **marks} if marks else self.counts

    def compile_started(self, *_: Any) -> None:
        """``torch.compile`` began (a dynamo callback): the controller's hang watch waits for a
        compiler, which sleeps in its subprocesses and file locks, as for a busy rank."""
        self._mark_compiling(True)

    def compile_ended(self, *_: Any) -> None:
        self._mark_compiling(False)

    def _mark_compiling(self, compiling: bool) -> None:
        self.compiling = compiling
        self.body = ledger_body(self.lines, self._counted())
        self._publish()

    def watch_compiles(self) -> None:
        """Have dynamo say when this rank compiles (torch 2.4 on: ``torch._dynamo.callback``; the
        callbacks take no arguments on older releases, a ``CallbackArgs`` on newer ones)."""
        try:
            from torch._dynamo.callback import callback_handler
        except ImportError:  # a torch without dynamo's callbacks: a compile looks like any busy rank
            return
        callback_handler.register_start_callback(self.compile_started)
        callback_handler.register_end_callback(self.compile_ended)

    def enter(self, name: str, args: tuple, kwargs: dict[str, Any], payload_index: int | None) -> None:
        payload = args[payload_index] if payload_index is not None and len(args) > payload_index else None
        described = name
        key = name
        if isinstance(payload, torch.Tensor):
            self.bytes_sent += payload.numel() * payload.element_size()
            described = f"{name}({payload.dtype}, shape={tuple(payload.shape)})"
            key = described if name in SAME_PAYLOAD else f"{name}({payload.dtype})"
        peers = _peers(args, kwargs)
        if peers:
            described += f" on ranks {{{peers}}}"
        self.entries.append(described)
        self.counts[peers] = self.counts.get(peers, 0) + 1
        self.ledger.append(Entered(len(self.entries), "" if name in POINT_TO_POINT else key, peers, described))
        self.lines.append(entry_line(self.ledger[-1]))
        self.body = ledger_body(self.lines, self._counted())  # published on entering, and again on leaving
        self.returned = False
        self._publish()

    def leave(self) -> None:
        self.returned = True
        self._publish()

    def _publish(self) -> None:
        if self.shared is not None:
            self.shared.value = self.text()

    def install(self) -> None:
        for name, payload_index in RECORDED.items():
            original = getattr(dist, name, None)
            if original is not None:
                setattr(dist, name, self._wrap(name, original, payload_index))

    def _wrap(self, name: str, original: Callable, payload_index: int | None) -> Callable:
        @functools.wraps(original)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.enter(name, args, kwargs, payload_index)
            result = original(*args, **kwargs)
            self.leave()
            return result

        return recorded


def _peers(args: tuple, kwargs: dict[str, Any]) -> str:
    """The global ranks of the group a collective runs on, as ``"1,3"``; ``""`` for the world."""
    group = kwargs.get("group")
    if group is None:
        group = next((arg for arg in args if isinstance(arg, dist.ProcessGroup)), None)
    if group is None or group is dist.group.WORLD:
        return ""
    try:
        return ",".join(map(str, dist.get_process_group_ranks(group)))
    except (RuntimeError, ValueError):  # not a group this rank belongs to: the collective will say so
        return ""


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
    """Answer ``run`` and ``call`` messages until ``stop`` (True) or the controller is gone (False):
    every rank's loop, pool ranks' (:func:`main`) and torchrun's (``harness.remote``)."""
    log.watch_compiles()
    handlers = {"run": functools.partial(on_run, log), "call": functools.partial(on_call, log),
                "batch": functools.partial(on_batch, log)}
    while True:
        try:
            name, payload = receive(conn)
        except (EOFError, OSError):
            return False
        if name == "stop":
            return True
        send(conn, "result", handlers[name](payload))


def on_run(log: CollectiveLog, request: RunRequest) -> RankResult:
    """Run the target on this rank's part of the case (:func:`harness.core.procedure.run_case`)."""
    log.reset()
    rank = dist.get_rank()
    issued_before = _issued_in_all(group_sequences())
    try:
        target = targets.load(request.target, fresh=request.reload)
    except BaseException as exc:  # a target that cannot be loaded here is this case's failure
        result = record_error(RankResult(rank=rank), exc, "setup")
    else:
        result = run_case(request, rank, target, case_device(request.case.device))
    result.collectives = list(log.entries)
    result.bytes_sent = log.bytes_sent
    result.sequences = group_sequences()
    result.unrecorded = max(0, _issued_in_all(result.sequences) - issued_before - len(log.entries))
    return result


def on_batch(log: CollectiveLog, batch: BatchRequest) -> RankResult:
    """Run a batch's cases back to back and judge each here (:func:`harness.core.checks.check_result`);
    ``value``: a :class:`~harness.core.procedure.BatchSummary`.  The ledger runs on across the
    cases.  A case that fails or leaves something behind ends the batch; the controller runs it
    again the usual way, which decides what it was."""
    from harness.core.checks import batch_notes, check_result  # judging on the rank: only batches need it

    log.reset()
    rank = dist.get_rank()
    result = RankResult(rank=rank, value=BatchSummary())
    issued_before = _issued_in_all(group_sequences())
    started = time.perf_counter()
    try:
        for index, request in enumerate(batch.requests):
            log.begin_case(index)
            target = targets.load(request.target, fresh=request.reload)
            one = run_case(request, rank, target, case_device(request.case.device))
            result.leaked = one.leaked
            if one.leaked or check_result(request.case, one, bits=batch.bits):
                break
            batch_notes(result.value, request.case, one, semantics=batch.semantics)
    except BaseException as exc:  # a target that cannot be loaded, or the harness's own error
        record_error(result, exc, "setup")
    result.timings["batch_s"] = time.perf_counter() - started
    result.collectives = list(log.entries)
    result.sequences = group_sequences()
    result.unrecorded = max(0, _issued_in_all(result.sequences) - issued_before - len(log.entries))
    return result


def on_call(log: CollectiveLog, payload: dict) -> RankResult:
    """Call a helper function on every rank (capability measurements, raw benchmarks)."""
    log.reset()
    result = RankResult(rank=dist.get_rank() if dist.is_initialized() else 0)
    try:
        result.value = targets.load(payload["target"])(*payload.get("args", ()))
    except BaseException as exc:
        record_error(result, exc, "call")
    result.collectives = list(log.entries)
    result.sequences = group_sequences()
    return result


def group_sequences() -> dict[str, tuple[tuple[int, ...], int]] | None:
    """Every process group this rank belongs to, by name: its global ranks and the operations
    this rank has issued on it (the backend's own count, so every op counts); ``None`` when the
    backend does not say.  The controller keeps a set only while these agree in each group: a
    rank that went on alone has used a tag its peers have not, and the next collective hangs.
    :data:`GROUPS_MADE` counts the groups made: one made on its members only would leave the
    next ``new_group`` naming one group two ways.
    """
    try:
        world = dist.distributed_c10d._world
        groups, names = dict(world.pg_group_ranks), world.pg_names
        sequences: dict[str, tuple[tuple[int, ...], int]] = {
            str(names[pg]): (tuple(sorted(ranks)), _issued(pg)) for pg, ranks in groups.items()
            if isinstance(pg, dist.ProcessGroup)}  # not a member: torch keys such a group by a sentinel int
        if dist.is_initialized():
            sequences[GROUPS_MADE] = (tuple(range(dist.get_world_size())), world.group_count)
        return sequences
    except (AttributeError, KeyError, RuntimeError):
        return None


#: The entry of :func:`group_sequences` that counts the groups a rank has made.
GROUPS_MADE = "(groups made)"


def _issued_in_all(sequences: dict[str, tuple[tuple[int, ...], int]] | None) -> int:
    """The operations issued on all of a rank's groups, from its :func:`group_sequences` (0 where
    torch does not say)."""
    return sum(count for name, (_, count) in (sequences or {}).items() if name != GROUPS_MADE)


def _issued(group: dist.ProcessGroup) -> int:
    """The operations issued on ``group`` so far: the backend's sequence number (torch 2.4 to 2.15
    at least; its stubs do not declare the method)."""
    return group._get_sequence_number_for_group()  # type: ignore[attr-defined]


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
    """Make NCCL collectives fail like gloo ones (defaults only; a user's setting wins).

    Blocking wait keeps a hanging rank inside the collective call, where its stack and ledger
    show it; asynchronous error handling turns an NCCL error into a crash, never a rank that
    lingers broken.
    """
    os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")


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
    """Send this rank's stdout/stderr (C++ aborts included) to its log file; its directory is
    gone only when the pool closed while this rank started, leaving nothing to do."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except FileNotFoundError:
        os._exit(0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    faulthandler.enable(file=sys.stderr, all_threads=True)


def die_with_parent(driver_pid: int) -> None:
    """Never outlive the driver, however it ends: Linux kills this rank when its parent dies, and
    a watchdog thread covers ``driver_pid`` dying while the parent lingers."""
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
