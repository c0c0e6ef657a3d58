"""One warm rank set: W real rank processes forming one process group, driven by the controller.

A set is forked from the forkserver, runs cases and helper calls (:meth:`RankSet.run`,
:meth:`RankSet.call`) while reading the ranks' collective ledgers, and is dropped after a fault;
what it learns of its processes is :mod:`harness.pool.evidence`'s.  :mod:`harness.pool.pool` keeps
the sets; :mod:`harness.pool.remote_driver` subclasses one for ranks started by torchrun.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from harness.core.case import Case
from harness.core.errors import CompileTimeout, PoolError, RankCallFailed
from harness.core.procedure import BatchRequest, BatchSummary, RankResult, RunRequest
from harness.pool.evidence import RankEvidence
from harness.pool.faults import Ledgers, Outcome, classify, file_size, file_tail, in_step
from harness.pool.machine import group_timeout_s
from harness.pool.watch import WINDOW_S, Watch
from harness.ranks import rank as rank_module
from harness.ranks.protocol import (
    BATCH_CASE,
    COMPILING,
    LEDGER_BYTES,
    RankInit,
    encode,
    read_slot,
    receive,
    send,
)
from harness.settings.options import COMPILE_PATIENCE

#: How long the other ranks may take to finish once one rank has raised or died, unless they are
#: seen idle first (:data:`harness.pool.watch.SETTLE_S`).
GRACE_S = 1.0
#: How long ranks asked to stop may take to leave before they are killed.
STOP_S = 1.0
#: How long the ranks get to make a case's process groups (gloo connects every pair of members):
#: the harness's own work, so never the target's ``--timeout``.  Measured on a loaded 2-core
#: machine: 25-30 ms median, 0.65 s at most in 600 makings of a group of 3 on fresh sets of 4.
GROUP_SETUP_S = 60.0
#: Batches run on one set until it has this many cases behind it; then the set is replaced, so that
#: the history a failure may need again is bounded (a fuzz run makes about a thousand cases a second).
MAX_BATCH_HISTORY = 2000
#: What every rank runs to make a layout's groups (:func:`harness.core.procedure.make_groups`).
MAKE_GROUPS = "harness.core.procedure:make_groups"


@dataclass
class BatchRun:
    """How a batch went on a set (:meth:`RankSet.run_batch`).

    - ``passed``: how many cases passed on every rank before the first that did not; ``None``
      when not known (a rank did not say which case it hung or died in).
    - ``history``: the cases these ranks ran before the batch, what a failure may need again.
    - ``matched``: per passing case, the gradient contracts every rank's gradient matched.
    """

    passed: int | None
    history: tuple[tuple[Case, bool], ...]
    written: bool = False
    matched: list[frozenset[str] | None] = field(default_factory=list)
    #: How the batch ended if not in a verdict of its own: ``hang``, ``crash`` or ``desync``.
    fault: str | None = None


def _summed(summaries: list[BatchSummary], passed: int) -> tuple[bool, list[frozenset[str] | None]]:
    """The ranks' summaries as one: a write on any rank, per case the contracts all matched."""
    matched: list[frozenset[str] | None] = []
    for k in range(passed if all(len(s.matched) >= passed for s in summaries) else 0):
        sets = [found for summary in summaries if (found := summary.matched[k]) is not None]
        matched.append(frozenset.intersection(*sets) if sets else None)
    return any(s.written for s in summaries), matched


class Host(Protocol):
    """What a set needs of the pool that keeps it (:class:`harness.pool.pool.LocalPool`)."""

    timeout: float
    #: The longest case timeout a set started now must outlast (:func:`harness.pool.machine.group_timeout_s`).
    longest_timeout: float
    context: Any
    tmpdir: str
    store: Any


class RankSet(RankEvidence):
    """W live rank processes forming one process group."""

    def __init__(self, pool: Host, backend: str, device: str, world_size: int, generation: int) -> None:
        self.pool = pool
        self.backend, self.device, self.world_size = backend, device, world_size
        self.prefix = f"{backend}-{device}-w{world_size}-g{generation}/"
        #: The process group's own timeout: beyond any wait of the harness's for a case up to
        #: the pool's longest case timeout, so the controller, never gloo, ends a case.
        self.group_timeout_s = group_timeout_s(pool.longest_timeout)
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
        #: How the last exchange's wait for unreturned ranks ended (:attr:`harness.pool.watch.Watch.verdict`).
        self.waited = ""
        #: The cases run since the target's state on these ranks was last fresh (set start or
        #: module reload), with their ``repeat`` flags: what a history-dependent finding needs.
        self.history: list[tuple[Case, bool]] = []
        self.reload_next = False
        #: The process groups every rank of this set has made (:meth:`make_groups`).
        self.groups: set[tuple[int, ...]] = set()

    # -- life cycle -------------------------------------------------------------------------
    def start(self, timeout_s: float) -> None:
        """Start the ranks and wait until every one has joined the group."""
        self.spawn()
        self.await_ready(timeout_s)

    def spawn(self, *, background: bool = False) -> None:
        """Start the rank processes, which join their group on their own; ``background``: from a
        thread (each fork takes ~15 ms, while the caller runs a case on another set)."""
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

    def await_ready(self, timeout_s: float) -> None:
        """Wait for every rank's ``ready``; raise :class:`PoolError` naming one that did not come."""
        if self.ready:
            return
        self._await_spawner()
        deadline = time.monotonic() + timeout_s
        for r, conn in enumerate(self.conns):
            if not self._wait_ready(r, conn, deadline):
                tail = file_tail(self.logs[r], 0)
                self.kill()
                raise PoolError(
                    f"rank {r} of a {self.backend}/{self.device} group of {self.world_size} did not start "
                    f"within {timeout_s:.0f}s{': ' + tail.strip() if tail.strip() else ''}"
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
            group_timeout_s=self.group_timeout_s,
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
        """Wait until ``deadline`` for the ranks to leave, kill the rest, and wait until they are
        gone, so no rank outlives whoever closes the pool."""
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        self.kill()
        for proc in self.procs:
            proc.join(timeout=STOP_S)

    def kill(self) -> None:
        """SIGKILL every rank at once; the forkserver, their parent, reaps them (no join: waiting
        for each status cost more than the rest of a shrinking step)."""
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
    def run(self, request: RunRequest, timeout_s: float, *, diagnose: bool = True,
            meanwhile: Callable[[], None] | None = None) -> Outcome:
        """Run one case; after a fault, a leak, or with its groups out of step (:func:`in_step`) the
        set is dropped.  Without ``diagnose`` a fault's stacks and logs are not collected (shrinking
        runs hundreds of faulty cases).  ``meanwhile`` runs once the ranks have the case."""
        started = time.perf_counter()
        if self.reload_next:
            request, self.reload_next, self.history = replace(request, reload=True), False, []
        log_offsets = [file_size(path) for path in self.logs]
        layout = request.case.layout()
        results = self._exchange("run", request, timeout_s, layout, meanwhile)
        outcome = Outcome(case=request.case, results=results, history=tuple(self.history))
        ledgers = Ledgers(self.last, layout)
        outcome.fault, outcome.desync = classify(results, self._dead(), ledgers)
        outcome.waited = self.waited
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

    def run_batch(self, batch: BatchRequest, timeout: float, *,
                  meanwhile: Callable[[], None] | None = None) -> BatchRun:
        """Run a batch (:class:`~harness.core.procedure.BatchRequest`) and say how it went (:class:`BatchRun`).

        A batch that passed, or failed a check with every rank back, in step and leaving nothing
        behind, keeps the set (the target's module executed afresh after a failure); any other
        drops it, as a fault does.  ``meanwhile`` runs while the ranks work.
        """
        requests = batch.requests
        if self.reload_next:
            requests = (replace(requests[0], reload=True), *requests[1:])
            self.reload_next, self.history = False, []
        before = tuple(self.history)
        layout = requests[0].case.layout()
        results = self._exchange("batch", replace(batch, requests=requests), timeout, layout, meanwhile)
        summaries = [res.value for res in results
                     if res is not None and not res.error and isinstance(res.value, BatchSummary)]
        where = [read_slot(self.last[r]).counts.get(BATCH_CASE) for r, res in enumerate(results) if res is None]
        known = len(summaries) + len(where) == len(results) and None not in where
        passed = min([summary.passed for summary in summaries] + [n for n in where if n is not None]) if known else None
        kept = len(summaries) == len(results) and in_step(results) and not any(
            res is not None and res.leaked for res in results)
        if kept and passed == len(requests):  # in step by the backend's own counts, functional collectives included
            self.history += [(request.case, request.repeat) for request in requests]
            if len(self.history) >= MAX_BATCH_HISTORY:
                self.kill()  # the next batch on fresh ranks: a history to replay stays short, the driver's memory bounded
            return BatchRun(passed, before, *_summed(summaries, passed))
        fault = classify(results, self._dead(), Ledgers(self.last, layout))[0]
        if kept and not any(res is not None and res.unrecorded for res in results):
            self.reload_next = True
        else:
            self.kill()
        return BatchRun(passed, before, *_summed(summaries, passed or 0), fault=fault)

    def make_groups(self, case: Case) -> None:
        """Have every rank make the process groups of ``case``'s layout that this set lacks, before
        the case and with its own wait (:data:`GROUP_SETUP_S`): inside the case a slow group would
        read as the target hanging.  A rank that does not is a :class:`RankCallFailed`."""
        if set(case.groups) <= self.groups:
            return
        what = f"making the process groups {case.groups_text()} on a {self.backend}/{self.device} set of {self.world_size}"
        results = self.call(MAKE_GROUPS, (case.groups,), GROUP_SETUP_S)
        failed = [f"rank {res.rank} raised {res.error_line()}" for res in results if res.error]
        if failed or self.broken:  # broken: the ranks came back disagreeing on the groups made
            raise RankCallFailed(what, "; ".join(failed) or "the ranks disagree on the groups made", died=False)
        self.groups.update(case.groups)

    def call(self, target: str, args: tuple, timeout_s: float) -> list[RankResult]:
        """Call ``target(*args)`` on every rank; :class:`RankCallFailed` says how a rank that did
        not return ended (exit status or signal and its last words, or where it was stuck)."""
        log_offsets = [file_size(path) for path in self.logs]
        results = self._exchange("call", {"target": target, "args": args}, timeout_s, (tuple(range(self.world_size)),))
        returned = [res for res in results if res is not None]
        if len(returned) < len(results):
            dead = self._dead()
            why = [self._death(r, self._last(r), log_offsets).headline() if dead[r]
                   else f"rank {r} still running after {timeout_s:g} s; last collective entered: {self._last(r)}"
                   for r, res in enumerate(results) if res is None]
            self.kill()
            raise RankCallFailed(f"calling {target} on a {self.backend}/{self.device} set of {self.world_size}",
                                 "; ".join(why), died=all(dead[r] for r, res in enumerate(results) if res is None))
        if any(res.error for res in returned) or not in_step(results):
            self.kill()
        return returned

    def _exchange(self, name: str, payload: Any, timeout_s: float, layout: tuple[tuple[int, ...], ...],
                  meanwhile: Callable[[], None] | None = None) -> list[RankResult | None]:
        """Send one message to every rank and collect the replies until done, provably stuck, or out of time.

        It reads the ranks' ledgers while waiting and stops at once on a desync or a doomed wait.
        Once a rank raises or dies, or in a batch stops at a case that failed on it, the others get
        :data:`GRACE_S` more, or less once seen idle (:meth:`Watch.settled`): they can finish the
        case they are on, never enter another with it.  In a batch each case has the whole ``timeout_s``.
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
        deadline = started + timeout_s
        ledgers = Ledgers(self.last, layout)
        watch = Watch(self._usage, started, timeout_s, self._compiling)  # not kept: it holds this set (a GC cycle)
        ended = False  # a rank has raised or died: the others have the grace
        batch = name == "batch"
        on, moved = self._batch_cases(), started  # in a batch: the case each rank is on, and since when
        while pending:
            now = time.monotonic()
            if now >= deadline - WINDOW_S:
                watch.nearly(sorted(pending.values()), now)
            poll = watch.poll_s(now)
            # past the deadline too, once: what the ranks sent meanwhile is taken before judging them
            for item in wait(list(pending) + list(sentinels), timeout=max(0.0, min(deadline - now, poll))):
                if item in sentinels:
                    del sentinels[item]
                    deadline, ended = min(deadline, time.monotonic() + GRACE_S), True
                elif item in pending:
                    r = pending.pop(item)
                    result = results[r] = _receive_result(item)
                    if result is None:
                        self.closed.add(r)
                    if result is None or result.error or (batch and _stopped_early(result, payload)):
                        deadline, ended = min(deadline, time.monotonic() + GRACE_S), True
            if pending and (ledgers.mismatch() or ledgers.doomed(sorted(pending.values()), results)):
                break
            if pending and ended and watch.settled(sorted(pending.values()), time.monotonic()):
                break
            if batch and on != (on := self._batch_cases()):
                moved = time.monotonic()
            if pending and not ended and time.monotonic() >= deadline and moved + timeout_s > deadline:
                deadline = moved + timeout_s  # each case of a batch has the whole timeout from when it began
                continue
            if pending and time.monotonic() >= deadline:
                later = watch.more_time(sorted(pending.values()), time.monotonic())
                if later is None:
                    break
                deadline = later
        self.waited = watch.verdict
        if watch.out_of_compile_time:
            self.kill()
            raise CompileTimeout(f"a case ran out of time while the target was compiling ({watch.verdict}): no "
                                 f"verdict on it; give the compiler more time with --timeout SECONDS (timeout= "
                                 f"from Python): a rank may compile for {COMPILE_PATIENCE:g} x a case's timeout")
        return results

    def _compiling(self, ranks: list[int]) -> bool:
        """Whether any of ``ranks`` is inside ``torch.compile``, by its ledger."""
        return any(read_slot(self.last[r]).counts.get(COMPILING) for r in ranks)

    def _batch_cases(self) -> tuple[int | None, ...]:
        """Which case of a batch each rank has published it is on (``None`` outside a batch)."""
        return tuple(read_slot(slot).counts.get(BATCH_CASE) for slot in self.last)


def _stopped_early(result: RankResult, batch: BatchRequest) -> bool:
    """Whether a rank's reply to ``batch`` says it stopped at a case that failed on it."""
    return isinstance(result.value, BatchSummary) and result.value.passed < len(batch.requests)


@contextlib.contextmanager
def _main_script_hidden():
    """Keep multiprocessing from re-running the driver's ``__main__`` script in every rank: a
    script without an ``if __name__ == "__main__"`` guard would start the check again in each."""
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
