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
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from multiprocessing.connection import Connection, wait
from typing import Any

import torch
import torch.distributed as dist

from harness import files, forkserver
from harness import rank as rank_module
from harness.case import Case
from harness.contract import MAX_WORLD_SIZE
from harness.conventions import Call
from harness.options import DEFAULT_TIMEOUT_S
from harness.procedure import RankResult, RunRequest
from harness.protocol import (
    LEDGER_BYTES,
    RETURNED,
    Ledger,
    RankInit,
    encode,
    last_entered,
    read_slot,
    receive,
    send,
)

#: How long the other ranks may take to finish once one rank has raised or died.
GRACE_S = 1.0
#: How long ranks asked to stop may take to leave before they are killed.
STOP_S = 1.0
#: How often the controller reads the ranks' collective ledgers while it waits for them: often
#: at first (a desync shows within milliseconds), then less so.
POLL_S = (0.005, 0.02)
_FAST_POLLS_S = 0.1
#: How long to wait for a rank to write its stack after SIGUSR1.
STACK_WAIT_S = 1.0
#: Sets kept starting in the background for a key that has had a fault: shrinking a fault
#: replaces the set at every step (measured on the 2-core box: a W=2 step took 90 ms with a
#: set started on demand, 60-65 ms with a spare; a second spare gained nothing, CPU-bound).
SPARES = 1
#: Resident memory of one warm rank (torch 2.13, gloo, CPU box: 240 MB measured, 216 MB of it
#: anonymous): what bounds how many local ranks a machine holds.
RANK_MEMORY_BYTES = 256 * 2**20


class PoolError(RuntimeError):
    """The harness could not start ranks or run its own helpers on them: never a fault of the
    code under test.  The message says what failed and what to try; the CLI exits 3 with it."""


class RankCallFailed(PoolError):
    """A rank did not return from a helper call (it died, or was still running at the timeout);
    ``ranks`` says how each such rank ended, the message also which call it was."""

    def __init__(self, call: str, ranks: str, *, died: bool) -> None:
        super().__init__(f"{call}: {ranks}")
        self.ranks = ranks
        #: Every rank that did not return had died (none was still running at the timeout).
        self.died = died


class PoolGone(BaseException):
    """The ranks are gone for good: a remote job that did not come back after a fault, or local
    sets that would not start again.

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
        """E.g. ``rank 1 blocked in collective #1 all_gather(...)``, then its stack, traceback or output.

        Collectives are numbered as each rank entered them in this case (#1 first), in every
        text of a fault, so "#3" means the same collective wherever it appears.
        """
        where = _where(self.last_collective)
        if self.state == "died":
            head, body = f"rank {self.rank} died: {_exit_text(self.exitcode)}, {where}", self.log_tail
        elif self.state == "blocked":
            if where.startswith("after"):  # the ledger says it left its last one; its stack says where it is
                where = f"(its last collective, {where.removeprefix('after collective ')})"
            head, body = f"rank {self.rank} blocked {where}", self.stack
        else:
            head, body = f"rank {self.rank} raised {where}", self.error
        return head + ("\n" + _indent(body.rstrip()) if body.strip() else "")

    def headline(self) -> str:
        """One line: what happened to the rank, with the last line it wrote if it died."""
        head = self.describe().splitlines()[0]
        last = next((line.strip() for line in reversed(self.log_tail.splitlines()) if line.strip()), "")
        return f"{head} ({last})" if self.state == "died" and last else head


def _where(last: str) -> str:
    """Where a rank was, from its last collective (:func:`harness.protocol.last_entered`)."""
    if not last.startswith("#"):
        return "before entering any collective"
    if last.endswith(RETURNED):
        return f"after collective {last[: -len(RETURNED)]} returned"
    return f"in collective {last}"


@dataclass
class Outcome:
    """What came back from one case: per-rank results, and the fault if the run broke.

    ``fault`` is ``None`` (every rank returned), ``"hang"`` (a rank never returned and none
    raised), ``"crash"`` (a rank process died), ``"exception"`` (a rank raised while others
    stayed blocked) or ``"desync"`` (two ranks of a group entered different collectives at
    the same place, or one waits inside a collective a returned peer never entered; ``desync``
    says where).  Ranks that raised and returned are in ``results`` with ``error`` set.
    """

    case: Case
    results: list[RankResult | None]
    fault: str | None = None
    faults: list[RankFault] = field(default_factory=list)
    elapsed_s: float = 0.0
    desync: str = ""
    history: tuple[tuple[Case, bool], ...] = ()

    @property
    def errors(self) -> list[RankResult]:
        return [r for r in self.results if r is not None and r.error]

    @property
    def leaks(self) -> list[str]:
        """What the target left behind on each rank (threads, open files); the set was replaced for it."""
        return [f"{leak} on rank {r.rank}" for r in self.results if r is not None for leak in r.leaked]

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
        self.ready = False
        self.spawner: threading.Thread | None = None
        self.spawned_at = 0.0
        self.startup_s = 0.0
        self.closed: set[int] = set()
        #: The cases run since the target's state on these ranks was last fresh (set start or
        #: module reload), with their ``repeat`` flags: what a history-dependent finding needs.
        self.history: list[tuple[Case, bool]] = []
        self.reload_next = False

    # -- life cycle -------------------------------------------------------------------------
    def start(self, timeout: float) -> None:
        """Start the ranks and wait until every one has joined the group."""
        self.spawn()
        self.await_ready(timeout)

    def spawn(self, *, background: bool = False) -> None:
        """Start the rank processes; they join their group on their own (see :meth:`await_ready`).

        ``background``: ask the forkserver for them from a thread (each fork takes it ~15 ms,
        during which the caller can run a case on another set).
        """
        self.spawned_at = time.perf_counter()
        if background:
            self.spawner = threading.Thread(target=self._spawn_all, name="gather-spawn-spare", daemon=True)
            self.spawner.start()
        else:
            self._spawn_all()

    def _spawn_all(self) -> None:
        for r in range(self.world_size):
            self._spawn(r)

    def _await_spawner(self) -> None:
        if self.spawner is not None:
            self.spawner.join()
            self.spawner = None

    def await_ready(self, timeout: float) -> None:
        """Wait for every rank's ``ready``; raise :class:`PoolError` naming one that did not come."""
        if self.ready:
            return
        self._await_spawner()
        deadline = time.monotonic() + timeout
        for r, conn in enumerate(self.conns):
            if not self._wait_ready(r, conn, deadline):
                tail = _tail(self.logs[r], 0)
                self.kill()
                raise PoolError(
                    f"rank {r} of a {self.backend}/{self.device} group of {self.world_size} did not start "
                    f"within {timeout:.0f}s{': ' + tail.strip() if tail.strip() else ''}"
                )
        self.ready = True
        self.startup_s = time.perf_counter() - self.spawned_at

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
        last = ctx.Array(ctypes.c_char, LEDGER_BYTES, lock=False)
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
        self.ask_to_stop()
        self.await_stopped(time.monotonic() + STOP_S)

    def ask_to_stop(self) -> None:
        self._await_spawner()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                send(conn, "stop", None)

    def await_stopped(self, deadline: float) -> None:
        """Wait until ``deadline`` for the ranks to leave, kill the rest, and wait for them to be gone.

        A process killed with SIGKILL is gone once the kernel has torn it down, which takes a
        moment: whoever closes the pool returns only after that, so no rank outlives it.
        """
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        self.kill()
        for proc in self.procs:
            proc.join(timeout=STOP_S)

    def kill(self) -> None:
        """SIGKILL every rank at once; the forkserver, their parent, reaps them.

        No join: a killed process is gone when the signal lands, and waiting for the
        forkserver to report each status cost more than the rest of a shrinking step.
        """
        self.broken = True
        self._await_spawner()
        for proc in self.procs:
            if proc.pid is not None and proc.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        for conn in self.conns:
            conn.close()
        self.conns = []
        for path in [*self.logs, *self.stacks]:  # read by the diagnosis, which is over: a long run keeps none
            with contextlib.suppress(OSError):
                os.unlink(path)

    # -- running ------------------------------------------------------------------------------
    def run(self, request: RunRequest, timeout: float, *, diagnose: bool = True,
            meanwhile: Callable[[], None] | None = None) -> Outcome:
        """Run one case; after a fault, a leak, or with its groups out of step the set is dropped.

        A case where every rank returned, errors included, with every process group's members
        at the same operation count (:func:`in_step`) leaves the set usable: the next case runs
        on the same warm ranks.  Without
        ``diagnose`` a fault is classified but its ranks' stacks and logs are not collected
        (shrinking runs hundreds of faulty cases; only the reported one needs them).
        ``meanwhile`` runs in the controller once the ranks have the case (the judge's reference).
        """
        started = time.perf_counter()
        if self.reload_next:
            request, self.reload_next, self.history = replace(request, reload=True), False, []
        log_offsets = [_size(path) for path in self.logs]
        layout = request.case.layout()
        results = self._exchange("run", request, timeout, layout, meanwhile)
        outcome = Outcome(case=request.case, results=results, history=tuple(self.history))
        ledgers = _Ledgers(self.last, layout)
        outcome.fault, outcome.desync = _classify(results, self._dead(), ledgers)
        if outcome.fault:
            outcome.faults = self._diagnose(results, log_offsets) if diagnose else []
            if outcome.fault == "hang" and ledgers.stuck_for_good(results):
                outcome.fault, outcome.desync = "desync", ledgers.stuck_for_good(results)
        if outcome.fault or any(res is not None and res.leaked for res in results) or not in_step(results):
            self.kill()
        else:
            self.history.append((request.case, request.repeat))
        outcome.elapsed_s = time.perf_counter() - started
        return outcome

    def call(self, target: str, args: tuple, timeout: float) -> list[RankResult]:
        """Call ``target(*args)`` on every rank; :class:`RankCallFailed` says how a rank that did
        not return ended (exit status or signal and its last words, or where it was stuck)."""
        log_offsets = [_size(path) for path in self.logs]
        results = self._exchange("call", {"target": target, "args": args}, timeout, (tuple(range(self.world_size)),))
        returned = [res for res in results if res is not None]
        if len(returned) < len(results):
            dead = self._dead()
            why = [self._death(r, self._last(r), log_offsets).headline() if dead[r]
                   else f"rank {r} still running after {timeout:g} s; last collective entered: {self._last(r)}"
                   for r, res in enumerate(results) if res is None]
            self.kill()
            raise RankCallFailed(f"calling {target} on a {self.backend}/{self.device} set of {self.world_size}",
                                 "; ".join(why), died=all(dead[r] for r, res in enumerate(results) if res is None))
        if any(res.error for res in returned) or not in_step(results):
            self.kill()
        return returned

    def _exchange(self, name: str, payload: Any, timeout: float, layout: tuple[tuple[int, ...], ...],
                  meanwhile: Callable[[], None] | None = None) -> list[RankResult | None]:
        """Send one message to every rank and collect the replies until done, provably stuck, or out of time.

        While waiting it reads every rank's collective ledger: two ranks of a group that
        entered different collectives at the same place, or ranks waiting inside collectives
        that a finished peer never entered, will never finish, so it stops at once.  Once a
        rank raises or dies the others get :data:`GRACE_S` more.  Only a rank stuck outside
        any collective costs the whole ``timeout``.
        """
        message = encode(name, payload)
        for r in range(self.world_size):
            self.last[r].value = b""  # no stale ledger from the last case
        for conn in self.conns:
            conn.send_bytes(message)
        if meanwhile is not None:
            meanwhile()
        self.closed = set()
        results: list[RankResult | None] = [None] * self.world_size
        pending = {conn: r for r, conn in enumerate(self.conns)}
        sentinels = self._sentinels()
        started = time.monotonic()
        deadline = started + timeout
        ledgers = _Ledgers(self.last, layout)
        while pending:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                break
            poll = POLL_S[0] if now - started < _FAST_POLLS_S else POLL_S[1]
            for item in wait(list(pending) + list(sentinels), timeout=min(remaining, poll)):
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
            if pending and (ledgers.mismatch() or ledgers.doomed(sorted(pending.values()), results)):
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

    def _last(self, r: int) -> str:
        return last_entered(read_slot(self.last[r]))

    def _diagnose(self, results: list[RankResult | None], log_offsets: list[int]) -> list[RankFault]:
        faults: list[RankFault] = []
        blocked = [r for r, res in enumerate(results) if res is None and self._alive(r)]
        # Read where each rank is just before its stack is dumped, so the two agree: a rank still
        # running moves on meanwhile.  A ledger known only from the dump (remote ranks) is read after it.
        before = [self._last(r) for r in range(self.world_size)]
        stacks = self._dump_stacks(blocked)
        for r, res in enumerate(results):
            last = (before[r] if before[r].startswith("#") else self._last(r)) or "(none)"
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

    def run(self, case: Case, target: str, *, call: Call | None = None, check_grad: bool | None = None,
            repeat: bool = True, timeout: float | None = None, detect: bool = False, declared: str = "",
            diagnose: bool = True, meanwhile: Callable[[], None] | None = None) -> Outcome:
        """Run ``target`` on ``case`` in a warm set of ``case.world_size`` ranks (see :class:`RunRequest`
        and :meth:`RankSet.run`)."""
        check_grad = case.grad != "none" if check_grad is None else check_grad
        request = RunRequest(case=case, target=target, call=call or Call(), check_grad=check_grad, repeat=repeat,
                             detect=detect, declared=declared)
        rank_set = self.rank_set(case.backend, case.device, case.world_size)
        return rank_set.run(request, self.timeout if timeout is None else timeout, diagnose=diagnose,
                            meanwhile=meanwhile)

    def forget_state(self, case: Case) -> None:
        """After a case failed: the target's module is executed afresh before the next case on
        these ranks, so state it keeps between calls cannot decide the next verdict."""
        rank_set = self.existing(case.backend, case.device, case.world_size)
        if rank_set is not None:
            rank_set.reload_next = True

    def fresh(self, case: Case) -> None:
        """The next case of ``case``'s kind runs on ranks that have run nothing before."""
        rank_set = self.existing(case.backend, case.device, case.world_size)
        if rank_set is not None:
            rank_set.kill()

    def existing(self, backend: str, device: str, world_size: int) -> RankSet | None:
        """The live set for this key, if there is one (never starts one)."""
        raise NotImplementedError

    def call(self, world_size: int, target: str, *args: Any, backend: str = "gloo", device: str = "cpu",
             timeout: float | None = None) -> list[RankResult]:
        """Call ``target(*args)`` on every rank of a set; the set is replaced if any rank fails
        (:class:`RankCallFailed` when one did not return)."""
        rank_set = self.rank_set(backend, device, world_size)
        return rank_set.call(target, args, self.timeout if timeout is None else timeout)

    def close(self) -> None:
        raise NotImplementedError


class Pool(RankSets):
    """Lazily started rank sets, one per (backend, device, world size), reused across cases."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT_S, start_timeout: float = 120.0) -> None:
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.context = forkserver.context()
        _remove_stale_dirs()
        self.tmpdir = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-")
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                   timeout=timedelta(seconds=60))
        self.sets: dict[tuple[str, str, int], RankSet] = {}
        #: A set started in the background for each key that has had a fault (see :meth:`rank_set`).
        self.spares: dict[tuple[str, str, int], list[RankSet]] = {}
        self.generation = 0
        self.spawned_sets = 0
        self.max_ranks = local_world_size_limit()
        self.closed = False
        atexit.register(self.close)

    def rank_set(self, backend: str, device: str, world_size: int) -> RankSet:
        """The warm set for this key, replacing it if there is none or it broke.

        After a fault the replacement is the *spare* started in the background after the
        previous fault, and a new spare starts at once: shrinking a fault replaces the set at
        every step, and the next step then finds its ranks (nearly) ready.  Sets are kept
        most-recently-used last; a set that would take the pool past :attr:`max_ranks` live
        ranks first stops the least recently used others (spares go first).
        """
        if self.closed:
            raise PoolError("the pool is closed")
        key = (backend, device, world_size)
        current = self.sets.pop(key, None)
        if current is None or current.broken:
            replacing = current is not None
            spares = self.spares.setdefault(key, [])
            current = spares.pop(0) if spares else self._new_set(key)
            self.sets[key] = current
            current = self._started(key, current)
            while replacing and len(spares) < SPARES and self.live_ranks() + world_size <= self.max_ranks:
                spares.append(self._new_set(key, background=True))  # starting while the next cases run
        self.sets[key] = current
        return current

    def _started(self, key: tuple[str, str, int], rank_set: RankSet) -> RankSet:
        """``rank_set`` once ready, or a second set started in its place: a start can fail for
        the machine's passing reasons (memory, process limits, a loaded box), and retrying it is
        safe; a second failure is the :class:`PoolError`, with what to try."""
        try:
            rank_set.await_ready(self.start_timeout)
            return rank_set
        except PoolError:
            self.sets[key] = rank_set = self._new_set(key)
        try:
            rank_set.await_ready(self.start_timeout)
        except PoolError as again:
            raise PoolError(f"{again} (the second try; the first failed too): the machine may be short of memory "
                            f"or processes; try again, or use fewer --world-sizes") from None
        return rank_set

    def _new_set(self, key: tuple[str, str, int], *, background: bool = False) -> RankSet:
        """A set for ``key`` whose ranks are starting (not yet waited for)."""
        backend, device, world_size = key
        check_devices(backend, device, world_size)
        if world_size > self.max_ranks:
            raise PoolError(too_many_ranks(world_size, self.max_ranks))
        self._make_room(world_size)
        self.generation += 1
        rank_set = RankSet(self, backend, device, world_size, self.generation)
        rank_set.spawn(background=background)
        self.spawned_sets += 1
        return rank_set

    def existing(self, backend: str, device: str, world_size: int) -> RankSet | None:
        rank_set = self.sets.get((backend, device, world_size))
        return None if rank_set is None or rank_set.broken else rank_set

    def live_ranks(self) -> int:
        return sum(s.world_size for s in [*self.sets.values(), *self._all_spares()] if not s.broken)

    def _all_spares(self) -> list[RankSet]:
        return [spare for spares in self.spares.values() for spare in spares]

    def _make_room(self, world_size: int) -> None:
        while self._all_spares() and self.live_ranks() + world_size > self.max_ranks:
            next(spares for spares in self.spares.values() if spares).pop().stop()
        while self.sets and self.live_ranks() + world_size > self.max_ranks:
            self.sets.pop(next(iter(self.sets))).stop()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        every = [*self.sets.values(), *self._all_spares()]
        for rank_set in every:  # all at once: their clean exits overlap
            rank_set.ask_to_stop()
        deadline = time.monotonic() + STOP_S
        for rank_set in every:
            rank_set.await_stopped(deadline)
        self.sets.clear()
        self.spares.clear()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: A pool's directory for its ranks' logs and stacks is ``<tmp>/gather-harness-<driver pid>-*``.
TMP_PREFIX = "gather-harness-"


def _remove_stale_dirs() -> None:
    """Remove the rank directories of drivers that died without closing their pool (SIGKILL, OOM)."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        pid = name.removeprefix(TMP_PREFIX).split("-", 1)[0]
        if name.startswith(TMP_PREFIX) and pid.isdigit() and not files.pid_alive(int(pid)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


_SHARED: Pool | None = None


def shared_pool() -> Pool:
    """The process-wide pool (one per pytest process or CLI run), created on first use.

    Its own timeout is the default one: a check's per-case timeout travels with each of its
    calls (``timeout=``), never by changing a pool other checks share.
    """
    global _SHARED
    if _SHARED is None or _SHARED.closed:
        _SHARED = Pool()
    return _SHARED


# ---------------------------------------------------------------------------------------------


def local_world_size_limit() -> int:
    """The most rank processes this machine holds at once: available memory over
    :data:`RANK_MEMORY_BYTES`, at most ``MAX_WORLD_SIZE`` (torchrun ranks go further)."""
    try:
        with open("/proc/meminfo") as meminfo:
            available_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return 8  # no /proc: the world sizes every laptop holds
    return max(1, min(MAX_WORLD_SIZE, available_kb * 1024 // RANK_MEMORY_BYTES))


def too_many_ranks(world_size: int, limit: int) -> str:
    return (f"{world_size} local ranks do not fit on this machine: it holds at most {limit} (each warm rank takes "
            f"about {RANK_MEMORY_BYTES >> 20} MB of the memory available); use a smaller --world-sizes, or serve "
            f"the cases to torchrun ranks with --listen")


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


def _classify(results: list[RankResult | None], dead: list[bool], ledgers: _Ledgers) -> tuple[str | None, str]:
    """The fault of a run, if any, and for a desync where it happened.

    A desync is named as such even when a rank then died of it (gloo aborts a rank whose
    peers sent payloads of another size): the mismatch is the cause, the abort its effect.
    """
    mismatch = ledgers.mismatch()
    if mismatch:
        return "desync", mismatch
    if any(dead):
        return "crash", ""
    if any(res is None for res in results):
        return ("exception" if any(res is not None and res.error for res in results) else "hang"), ""
    if not any(res.error for res in results if res is not None):
        for group in ledgers.layout:
            counts = {r: len(res.collectives) for r in group if (res := results[r]) is not None}
            if len(set(counts.values())) > 1:
                return "desync", "ranks entered different numbers of collectives: " + ", ".join(
                    f"rank {r} entered {_collectives(n)}" for r, n in counts.items())
    return None, ""


def in_step(results: list[RankResult | None]) -> bool:
    """Every rank returned, and the members of each process group have issued as many operations on it.

    Only then may a set run another case.  The recorded collectives are not enough: a rank whose
    peers raised may go on alone through collectives that complete without them (gloo gathers
    empty tensors locally), and functional or autograd-internal collectives are not recorded;
    either way that rank is ahead by a collective tag, and the next case on the group would hang
    on every rank -- a hang that is the harness's, not the target's.
    """
    counts: dict[str, dict[int, int]] = {}
    members: dict[str, tuple[int, ...]] = {}
    for rank, res in enumerate(results):  # by place: a helper that formed the group reports rank 0 everywhere
        if res is None or res.sequences is None:
            return False
        for name, (ranks, count) in res.sequences.items():
            members[name] = ranks
            counts.setdefault(name, {})[rank] = count
    return all(set(counts[name]) == set(ranks) and len(set(counts[name].values())) == 1
               for name, ranks in members.items())


class _Ledgers:
    """The collectives each rank of a running case has entered, compared within each group.

    Read from the ranks' ledgers (:func:`harness.protocol.read_slot`) while they run.  Two
    members of one group that entered different collectives (or the same one on different
    process groups) at the same place can never both complete (:meth:`mismatch`); neither can
    a rank waiting inside a collective that a finished peer of that collective's process group
    entered fewer times (:meth:`doomed`): the peer will never enter it.
    """

    def __init__(self, slots: list[Any], layout: tuple[tuple[int, ...], ...]) -> None:
        self.slots = slots
        self.layout = layout

    def _read(self, r: int) -> Ledger:
        return read_slot(self.slots[r])

    def mismatch(self) -> str:
        """Where two members of a group entered different collectives at the same place, or ``""``."""
        for group in self.layout:
            first, *others = group
            mine = self._read(first).by_seq()
            for other in others:
                theirs = self._read(other).by_seq()
                for seq in sorted(mine.keys() & theirs.keys()):
                    a, b = mine[seq], theirs[seq]
                    if a.key and b.key and (a.key, a.peers) != (b.key, b.peers):
                        return (f"at collective #{seq}, rank {first} entered {a.described} but rank {other} entered "
                                f"{b.described}")
        return ""

    def doomed(self, waiting: list[int], results: list[RankResult | None]) -> bool:
        """Every waiting rank sits inside a collective that a finished peer never entered.

        A rank that returned, raised or died has entered its last collective, so a peer
        inside a later one can only wait for the timeout: stop now, not after the grace.
        """
        return bool(waiting) and all(self._hopeless(r, waiting) for r in waiting)

    def _hopeless(self, r: int, waiting: list[int]) -> bool:
        ledger = self._read(r)
        inside = ledger.inside()
        if inside is None:
            return False
        peers = [int(p) for p in inside.peers.split(",")] if inside.peers else range(len(self.slots))
        mine = ledger.counts.get(inside.peers, 0)
        return any(self._read(s).counts.get(inside.peers, 0) < mine for s in peers if s != r and s not in waiting)

    def stuck_for_good(self, results: list[RankResult | None]) -> str:
        """After a timeout: blocked ranks waiting in collectives a finished peer never entered, described."""
        waiting = [r for r, res in enumerate(results) if res is None]
        for r in waiting:
            if self._hopeless(r, waiting):
                return (f"rank {r} waits in collective {last_entered(self._read(r))}, which a peer that "
                        f"finished never entered")
        return ""


def _fault_summary(outcome: Outcome) -> str:
    by_state: dict[str, list[int]] = {}
    for fault in outcome.faults:
        by_state.setdefault(fault.state, []).append(fault.rank)
    parts = [f"{state} on rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}" for state, r in by_state.items()]
    if outcome.fault == "desync":
        returned = [res for res in outcome.results if res is not None and not res.error]
        parts = [outcome.desync] + [
            f"rank {res.rank} returned after {_collectives(len(res.collectives))}"
            + (": " + ", ".join(f"#{n} {name}" for n, name in enumerate(res.collectives, 1)) if res.collectives else "")
            for res in returned
        ]
    return "; ".join(parts) or "no rank returned"


def _collectives(count: int) -> str:
    return f"{count} collective{'' if count == 1 else 's'}"


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
