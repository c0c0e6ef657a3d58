"""The controller side of the rank pool: warm, self-healing sets of real process-group ranks.

One :class:`RankSet` per (backend, device, world size), started lazily from a forkserver
that has imported torch once, kept warm across examples and tests, and thrown away after
any fault (hang, crash, exception, desync): a fresh set costs tens of milliseconds, and a
rank that was blocked in, or raised out of, a collective can never be trusted again.

The driver hosts the rendezvous store (a ``TCPStore`` on an OS-chosen loopback port) but
never joins a group.  Each set generation uses its own store prefix, so a new group can
never meet a straggler of an old one.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any

import torch
import torch.distributed as dist

from harness import rank as rank_module
from harness.case import Case
from harness.protocol import RankInit, RankResult, RunRequest, receive, send

#: How long the other ranks may take to finish once one rank has raised or died.
GRACE_S = 1.0
#: How long ranks may sit unchanged inside mismatched collectives before it counts as desync.
STALL_S = 1.0
#: How long to wait for a rank to write its stack after SIGUSR1.
STACK_WAIT_S = 1.0
DEFAULT_TIMEOUT_S = 10.0


class PoolError(RuntimeError):
    """The pool itself could not start ranks (not a fault of the code under test)."""


class PoolGone(BaseException):
    """The ranks are gone for good (a remote job that did not come back after a fault).

    A ``BaseException``, like ``KeyboardInterrupt``, so that Hypothesis stops at once instead
    of taking it for a failure of the code under test and shrinking it; the CLI reports it
    as a harness error.
    """


@dataclass
class RankFault:
    """Why one rank did not return normally, with what is known about where it was."""

    rank: int
    state: str  # "raised", "blocked", "died"
    exitcode: int | None = None
    last_collective: str = ""
    stack: str = ""
    log_tail: str = ""
    error: str = ""

    def describe(self) -> str:
        if self.state == "died":
            head = f"rank {self.rank} died: {_exit_text(self.exitcode)}; last collective entered: {self.last_collective}"
            body = self.log_tail
        elif self.state == "blocked":
            head = f"rank {self.rank} blocked; last collective entered: {self.last_collective}"
            body = self.stack
        else:
            head = f"rank {self.rank} raised; last collective entered: {self.last_collective}"
            body = self.error
        return head + ("\n" + _indent(body.rstrip()) if body.strip() else "")


@dataclass
class Outcome:
    """What came back from one case: per-rank results, and the fault if the run broke.

    ``fault`` is ``None`` (every rank returned), ``"hang"`` (a rank never returned and none
    raised), ``"crash"`` (a rank process died), ``"exception"`` (a rank raised while others
    stayed blocked) or ``"desync"`` (every rank returned but they entered different
    collectives).  Ranks that raised and returned are in ``results`` with ``error`` set.
    """

    case: Case
    results: list[RankResult | None]
    fault: str | None = None
    faults: list[RankFault] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def errors(self) -> list[RankResult]:
        return [r for r in self.results if r is not None and r.error]

    def describe_fault(self) -> str:
        lines = [f"{self.fault}: " + _fault_summary(self)]
        lines += [fault.describe() for fault in self.faults]
        return "\n".join(lines)


class RankSet:
    """W live rank processes forming one process group."""

    def __init__(self, pool: Pool, backend: str, device: str, world_size: int, generation: int) -> None:
        self.pool = pool
        self.backend, self.device, self.world_size = backend, device, world_size
        self.prefix = f"{backend}-{device}-w{world_size}-g{generation}/"
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.last: list[Any] = []
        self.logs: list[str] = []
        self.stacks: list[str] = []
        self.broken = False
        self.startup_s = 0.0
        self.closed: set[int] = set()

    # -- life cycle -------------------------------------------------------------------------
    def start(self, timeout: float) -> None:
        started = time.perf_counter()
        for r in range(self.world_size):
            self._spawn(r)
        deadline = time.monotonic() + timeout
        for r, conn in enumerate(self.conns):
            if not self._wait_ready(r, conn, deadline):
                tail = _tail(self.logs[r], 0)
                self.kill()
                raise PoolError(
                    f"rank {r} of a {self.backend}/{self.device} group of {self.world_size} did not start "
                    f"within {timeout:.0f}s{': ' + tail.strip() if tail.strip() else ''}"
                )
        self.startup_s = time.perf_counter() - started

    def _spawn(self, r: int) -> None:
        ctx = self.pool.context
        base = os.path.join(self.pool.tmpdir, f"{self.prefix.rstrip('/')}-r{r}")
        self.logs.append(base + ".log")
        self.stacks.append(base + ".stack")
        init = RankInit(
            rank=r,
            world_size=self.world_size,
            backend=self.backend,
            device=self.device,
            store_host="127.0.0.1",
            store_port=self.pool.store.port,
            store_prefix=self.prefix,
            group_timeout_s=group_timeout_s(self.pool.timeout),
            log_path=self.logs[r],
            stack_path=self.stacks[r],
            sys_path=tuple(sys.path),
            cwd=os.getcwd(),
            driver_pid=os.getpid(),
        )
        parent_end, child_end = ctx.Pipe()
        last = ctx.Array(ctypes.c_char, 256, lock=False)
        proc = ctx.Process(
            target=rank_module.main, args=(init, child_end, last), daemon=True, name=f"gather-rank-{self.prefix}r{r}"
        )
        with _main_script_hidden():
            proc.start()
        child_end.close()
        self.procs.append(proc)
        self.conns.append(parent_end)
        self.last.append(last)

    def _wait_ready(self, r: int, conn: Connection, deadline: float) -> bool:
        while time.monotonic() < deadline:
            ready = wait([conn, self.procs[r].sentinel], timeout=max(0.0, deadline - time.monotonic()))
            if conn in ready:
                try:
                    name, _ = receive(conn)
                except (EOFError, OSError):
                    return False
                return name == "ready"
            if ready:
                return False
        return False

    def stop(self) -> None:
        """Ask ranks to leave cleanly; kill whatever does not."""
        for conn in self.conns:
            try:
                send(conn, "stop", None)
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=1.0)
        self.kill()

    def kill(self) -> None:
        self.broken = True
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
        for proc in self.procs:
            proc.join(timeout=5.0)
        for conn in self.conns:
            conn.close()
        self.conns = []

    # -- running ------------------------------------------------------------------------------
    def run(self, request: RunRequest, timeout: float) -> Outcome:
        started = time.perf_counter()
        log_offsets = [_size(path) for path in self.logs]
        results = self._exchange("run", request, timeout)
        outcome = Outcome(case=request.case, results=results)
        outcome.fault = _classify(results, self._dead())
        if outcome.fault or outcome.errors:
            outcome.faults = self._diagnose(results, log_offsets) if outcome.fault else []
            if outcome.fault == "hang" and _blocked_in_different_collectives(outcome.faults, results):
                outcome.fault = "desync"
            self.kill()  # a rank that raised or blocked may have left the group out of step
        outcome.elapsed_s = time.perf_counter() - started
        return outcome

    def call(self, target: str, args: tuple, timeout: float) -> list[RankResult | None]:
        results = self._exchange("call", {"target": target, "args": args}, timeout)
        if any(r is None or r.error for r in results):
            self.kill()
        return results

    def _exchange(self, name: str, payload: Any, timeout: float) -> list[RankResult | None]:
        """Send one message to every rank and collect the replies until done or out of time.

        Once a rank raises or dies the others get :data:`GRACE_S` more: they are usually
        blocked in a collective the failed rank will never join.
        """
        for conn in self.conns:
            send(conn, name, payload)
        self.closed = set()
        results: list[RankResult | None] = [None] * self.world_size
        pending = {conn: r for r, conn in enumerate(self.conns)}
        sentinels = self._sentinels()
        deadline = time.monotonic() + timeout
        stall = _StallWatch(self.last)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for item in wait(list(pending) + list(sentinels), timeout=min(remaining, stall.poll_s)):
                if item in sentinels:
                    del sentinels[item]
                    deadline = min(deadline, time.monotonic() + GRACE_S)
                elif item in pending:
                    r = pending.pop(item)
                    result = results[r] = _receive_result(item)
                    if result is None:
                        self.closed.add(r)
                    if result is None or result.error:
                        deadline = min(deadline, time.monotonic() + GRACE_S)
            waiting = sorted(pending.values())
            if waiting and (self._doomed(waiting, results) or stall.desynced(waiting, len(waiting) < self.world_size)):
                break
        return results

    # -- what differs for ranks that are not our child processes (harness.remote) -------------
    def _sentinels(self) -> dict[Any, int]:
        """Waitables that become ready when a rank process ends, mapped to its rank."""
        return {p.sentinel: r for r, p in enumerate(self.procs)}

    def _dead(self) -> list[bool]:
        """Which ranks are dead; a rank whose pipe closed is, and the forkserver soon says how."""
        for r in self.closed:
            self.procs[r].join(timeout=2.0)
        return [not p.is_alive() for p in self.procs]

    def _alive(self, r: int) -> bool:
        return self.procs[r].is_alive()

    def _death(self, r: int, last: str, log_offsets: list[int]) -> RankFault:
        """The fault of a rank that died: its exit status and what it wrote meanwhile."""
        self.procs[r].join(timeout=1.0)
        return RankFault(r, "died", exitcode=self.procs[r].exitcode, last_collective=last,
                         log_tail=_tail(self.logs[r], log_offsets[r]))

    def _doomed(self, waiting: list[int], results: list[RankResult | None]) -> bool:
        """Every waiting rank sits in a collective that some finished rank never entered.

        A rank that returned, raised or died has entered its last collective, so a peer
        inside a later one can only wait for the timeout: stop now, not after the grace.
        """
        finished = [r for r in range(self.world_size) if r not in waiting]
        if not finished:
            return False
        counts = [len(res.collectives) if (res := results[r]) is not None else _entered(self.last[r]) for r in finished]
        return all(_inside_collective(self._last(r)) and _entered(self.last[r]) > min(counts) for r in waiting)

    def _last(self, r: int) -> str:
        return self.last[r].value.decode(errors="replace")

    def _diagnose(self, results: list[RankResult | None], log_offsets: list[int]) -> list[RankFault]:
        faults: list[RankFault] = []
        blocked = [r for r, res in enumerate(results) if res is None and self._alive(r)]
        stacks = self._dump_stacks(blocked)
        for r, res in enumerate(results):
            last = self._last(r) or "(none)"
            if res is not None and res.error:
                faults.append(RankFault(r, "raised", last_collective=last, error=res.error))
            elif res is None and r in blocked:
                faults.append(RankFault(r, "blocked", last_collective=last, stack=stacks.get(r, "")))
            elif res is None:
                faults.append(self._death(r, last, log_offsets))
        return faults

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        """Have each blocked rank's faulthandler write its Python stacks, then read them."""
        sizes = {r: _size(self.stacks[r]) for r in ranks}
        for r in ranks:
            try:
                os.kill(self.procs[r].pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STACK_WAIT_S
        stacks: dict[int, str] = {}
        while time.monotonic() < deadline and len(stacks) < len(ranks):
            time.sleep(0.02)
            for r in ranks:
                if r not in stacks and _size(self.stacks[r]) > sizes[r]:
                    time.sleep(0.02)  # let the dump finish
                    stacks[r] = _without_watchdog(_tail(self.stacks[r], sizes[r], limit=8000))
        return stacks


class RankSets:
    """Running cases and helper calls on rank sets; subclasses say where a set comes from."""

    timeout: float

    def rank_set(self, backend: str, device: str, world_size: int) -> RankSet:
        raise NotImplementedError

    def run(self, case: Case, target: str, *, check_grad: bool | None = None, repeat: bool = True,
            timeout: float | None = None) -> Outcome:
        """Run ``target`` on ``case`` in a warm set of ``case.world_size`` ranks."""
        check_grad = case.grad != "none" if check_grad is None else check_grad
        request = RunRequest(case=case, target=target, check_grad=check_grad, repeat=repeat)
        rank_set = self.rank_set(case.backend, case.device, case.world_size)
        return rank_set.run(request, self.timeout if timeout is None else timeout)

    def call(self, world_size: int, target: str, *args: Any, backend: str = "gloo", device: str = "cpu",
             timeout: float | None = None) -> list[RankResult | None]:
        """Call ``target(*args)`` on every rank of a set; the set is replaced if any rank fails."""
        rank_set = self.rank_set(backend, device, world_size)
        return rank_set.call(target, args, self.timeout if timeout is None else timeout)

    def close(self) -> None:
        raise NotImplementedError


class Pool(RankSets):
    """Lazily started rank sets, one per (backend, device, world size), reused across cases."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT_S, start_timeout: float = 120.0) -> None:
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.context = multiprocessing.get_context("forkserver")
        # torch._dynamo too: torch imports it lazily the first time a custom op (e.g. a
        # functional collective) runs, 1-2 s per rank that would count against the first
        # case's timeout and read as a hang on a loaded machine.  The forkserver pays it once.
        self.context.set_forkserver_preload(["harness.rank", "torch._dynamo"])
        self.tmpdir = tempfile.mkdtemp(prefix="gather-harness-")
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                   timeout=timedelta(seconds=60))
        self.sets: dict[tuple[str, str, int], RankSet] = {}
        self.generation = 0
        self.spawned_sets = 0
        self.closed = False
        atexit.register(self.close)

    def rank_set(self, backend: str, device: str, world_size: int) -> RankSet:
        """The warm set for this key, starting a fresh one if there is none or it broke."""
        if self.closed:
            raise PoolError("the pool is closed")
        key = (backend, device, world_size)
        current = self.sets.get(key)
        if current is None or current.broken:
            check_devices(backend, device, world_size)
            self.generation += 1
            current = RankSet(self, backend, device, world_size, self.generation)
            self.sets[key] = current
            current.start(self.start_timeout)
            self.spawned_sets += 1
        return current

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for rank_set in self.sets.values():
            rank_set.stop()
        self.sets.clear()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: Pool | None = None


def shared_pool(timeout: float = DEFAULT_TIMEOUT_S) -> Pool:
    """The process-wide pool (one per pytest process or CLI run), created on first use."""
    global _SHARED
    if _SHARED is None or _SHARED.closed:
        _SHARED = Pool(timeout=timeout)
    _SHARED.timeout = timeout
    return _SHARED


# ---------------------------------------------------------------------------------------------


def group_timeout_s(case_timeout: float) -> float:
    """The process group's own timeout: far beyond the case timeout, so that the controller,
    not the backend, decides when a rank hangs (and can dump its stack first)."""
    return max(3600.0, 4 * case_timeout)


def check_devices(backend: str, device: str, world_size: int) -> None:
    """Refuse a set this machine cannot host, before starting ranks that would fail obscurely.

    nccl moves CUDA tensors only and needs one GPU per rank; gloo with CUDA tensors needs
    one GPU at least (ranks then share GPUs round-robin).
    """
    if backend == "nccl" and device != "cuda":
        raise PoolError(f"an nccl group needs device=cuda, not device={device}")
    if device != "cuda":
        return
    count = torch.cuda.device_count()
    if count == 0:
        raise PoolError(f"device=cuda: torch {torch.__version__} sees no CUDA device")
    if backend == "nccl" and world_size > count:
        raise PoolError(f"an nccl group of {world_size} ranks needs {world_size} GPUs, and torch sees {count}")


@contextlib.contextmanager
def _main_script_hidden():
    """Keep multiprocessing from re-running the driver's ``__main__`` script in every rank.

    Ranks need nothing from it, and a user's script without an ``if __name__ ==
    "__main__"`` guard would otherwise start the whole check again inside each rank.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _receive_result(conn: Connection) -> RankResult | None:
    try:
        return receive(conn)[1]
    except (EOFError, OSError):
        return None  # the rank died; its sentinel tells how


def _classify(results: list[RankResult | None], dead: list[bool]) -> str | None:
    if any(dead):
        return "crash"
    missing = [r for r, res in enumerate(results) if res is None]
    if missing:
        return "exception" if any(res is not None and res.error for res in results) else "hang"
    if len({tuple(res.collectives) for res in results if res is not None}) > 1 and not any(
        res.error for res in results if res is not None
    ):
        return "desync"
    return None


def _entered(shared: Any) -> int:
    """How many collectives a rank has entered, from its published ``#n name`` entry."""
    entry = shared.value.decode(errors="replace")
    return int(entry[1:].split(" ", 1)[0]) if entry.startswith("#") else 0


def _inside_collective(entry: str) -> bool:
    return entry.startswith("#") and not entry.endswith("(returned)")


def _blocked_in_different_collectives(faults: list[RankFault], results: list[RankResult | None]) -> bool:
    """Every blocked rank waits inside a collective that cannot complete: the ranks disagree
    on which collective comes next, or a peer already returned without entering it."""
    entered = [f.last_collective for f in faults if f.state == "blocked"]
    someone_returned = any(res is not None and not res.error for res in results)
    return bool(entered) and all(map(_inside_collective, entered)) and (len(set(entered)) > 1 or someone_returned)


class _StallWatch:
    """Spots a desync early: blocked ranks sit in mismatched collectives and nothing moves.

    Waiting for the full timeout would cost seconds per shrink step; a desynced group
    never recovers, so :data:`STALL_S` without progress is proof enough.
    """

    poll_s = 0.1

    def __init__(self, last: list[Any]) -> None:
        self.last = last
        self.snapshot: tuple[str, ...] | None = None
        self.since = time.monotonic()

    def desynced(self, pending: list[int], someone_returned: bool) -> bool:
        entries = tuple(self.last[r].value.decode(errors="replace") for r in pending)
        if entries != self.snapshot:
            self.snapshot, self.since = entries, time.monotonic()
            return False
        mismatched = all(map(_inside_collective, entries)) and (len(set(entries)) > 1 or someone_returned)
        return mismatched and time.monotonic() - self.since >= STALL_S


def _fault_summary(outcome: Outcome) -> str:
    by_state: dict[str, list[int]] = {}
    for fault in outcome.faults:
        by_state.setdefault(fault.state, []).append(fault.rank)
    parts = [f"{state} on rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}" for state, r in by_state.items()]
    if outcome.fault == "desync":
        parts = [
            f"rank {res.rank} entered {len(res.collectives)} collective(s): {', '.join(res.collectives) or '(none)'}"
            for res in outcome.results
            if res is not None
        ]
    return "; ".join(parts) or "no rank returned"


def _exit_text(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} (exit {code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _tail(path: str, offset: int, limit: int = 3000) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return ""
    text = data.decode(errors="replace")
    return text if len(text) <= limit else "…" + text[-limit:]


def _without_watchdog(stack: str) -> str:
    """Drop the rank's own watchdog thread from a faulthandler dump: it is never the culprit."""
    blocks = stack.split("\n\n")
    return "\n\n".join(b for b in blocks if "_watch_driver" not in b).strip()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
