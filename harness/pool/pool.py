"""The controller side of the rank pool: warm, self-healing sets of real process-group ranks.

One :class:`RankSet` per (backend, device, world size), started lazily, kept warm across
examples and tests, and thrown away after any fault: a fresh set costs tens of milliseconds, and
a rank that was blocked in, or raised out of, a collective can never be trusted again.  The
driver hosts the rendezvous store but never joins a group; each set generation has its own
store prefix, so a new group never meets a straggler of an old one.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from harness.core.case import Case
from harness.core.conventions import Call
from harness.core.errors import PoolError, RankCallFailed
from harness.core.procedure import BatchRequest, RankResult, RunRequest
from harness.pool import forkserver
from harness.pool.faults import Outcome
from harness.pool.machine import check_devices, group_timeout_s, local_world_size_limit, too_many_ranks
from harness.pool.rankset import STOP_S, BatchRun, RankSet
from harness.settings import files
from harness.settings.options import DEFAULT_TIMEOUT_S

#: Sets kept starting in the background for a key that has had a fault: shrinking a fault
#: replaces the set at every step (on a 2-core machine a W=2 step took 90 ms with a
#: set started on demand, 60-65 ms with a spare; a second spare gained nothing, CPU-bound).
SPARES = 1
class Pool:
    """Running cases and helper calls on rank sets; subclasses say where a set comes from."""

    timeout: float

    def rank_set(self, backend: str, device: str, world_size: int) -> RankSet:
        raise NotImplementedError

    def outlast(self, timeout: float | None) -> float:
        """The case timeout of a call (``None``: the pool's own), once the sets it may run on are
        sure to outlast it: a pool whose process groups could time out first replaces them."""
        return self.timeout if timeout is None else timeout

    def run(self, case: Case, target: str, *, call: Call | None = None, check_grad: bool | None = None,
            repeat: bool = True, timeout: float | None = None, detect: bool = False, declared: str = "",
            requires_grad: bool = False, diagnose: bool = True,
            meanwhile: Callable[[], None] | None = None) -> Outcome:
        """Run ``target`` on ``case`` in a warm set of ``case.world_size`` ranks (see :class:`RunRequest`
        and :meth:`RankSet.run`)."""
        check_grad = case.grad != "none" if check_grad is None else check_grad
        request = RunRequest(case=case, target=target, call=call or Call(), check_grad=check_grad, repeat=repeat,
                             detect=detect, declared=declared, requires_grad=requires_grad)
        return self.run_request(request, timeout, diagnose=diagnose, meanwhile=meanwhile)

    def run_request(self, request: RunRequest, timeout: float | None = None, *, diagnose: bool = True,
                    meanwhile: Callable[[], None] | None = None) -> Outcome:
        """Run ``request`` on a warm set with its case's process groups made (:meth:`RankSet.run`)."""
        wait_s = self.outlast(timeout)
        rank_set = self.set_with_groups(request.case)
        return rank_set.run(request, wait_s, diagnose=diagnose, meanwhile=meanwhile)

    def run_batch(self, batch: BatchRequest, timeout: float | None = None, *,
                  meanwhile: Callable[[], None] | None = None) -> BatchRun:
        """Run a batch of one layout's cases on a warm set (:meth:`RankSet.run_batch`)."""
        wait_s = self.outlast(timeout)
        rank_set = self.set_with_groups(batch.requests[0].case)
        return rank_set.run_batch(batch, wait_s, meanwhile=meanwhile)

    def lanes(self, world_size: int) -> int:
        """How many batches of ``world_size`` ranks may run at once (:meth:`run_batches`): one here."""
        return 1

    def twin_set(self, backend: str, device: str, world_size: int) -> RankSet:
        """A second warm set for the key, for a second batch at once (where :meth:`lanes` allows one)."""
        raise PoolError("this pool runs one batch at a time")

    def run_batches(self, batches: list[BatchRequest], timeout: float | None = None, *,
                    meanwhile: Callable[[], None] | None = None) -> list[BatchRun]:
        """Batches of one world size at once, the first on the key's own set (with ``meanwhile``),
        each other on a twin (:meth:`twin_set`), from a thread of its own, so the second set's
        ranks work while the first's wait in their collectives (:meth:`lanes`)."""
        wait_s = self.outlast(timeout)
        twins = []
        for batch in batches[1:]:
            case = batch.requests[0].case
            twin = self.twin_set(case.backend, case.device, case.world_size)
            twin.make_groups(case)
            twins.append(twin)
        results: list[Any] = [None] * len(batches)

        def run(i: int) -> None:
            try:
                results[i] = twins[i - 1].run_batch(batches[i], wait_s)
            except BaseException as exc:  # re-raised by the caller's thread
                results[i] = exc

        threads = [threading.Thread(target=run, args=(i,), name=f"gather-batch-{i}", daemon=True)
                   for i in range(1, len(batches))]
        for thread in threads:
            thread.start()
        try:
            results[0] = self.run_batch(batches[0], wait_s, meanwhile=meanwhile)
        finally:
            for thread in threads:
                thread.join()
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results

    def set_with_groups(self, case: Case) -> RankSet:
        """The warm set for ``case`` once every rank has made its process groups; ranks that do not
        are replaced and asked once again (a second failure is the :class:`PoolError`)."""
        rank_set = self.rank_set(case.backend, case.device, case.world_size)
        try:
            rank_set.make_groups(case)
            return rank_set
        except RankCallFailed:
            rank_set = self.rank_set(case.backend, case.device, case.world_size)  # the failed set was dropped
        try:
            rank_set.make_groups(case)
        except RankCallFailed as again:
            raise PoolError(f"{again} (the second try, on fresh ranks; the first failed too)") from None
        return rank_set

    def after_failure(self, outcome: Outcome) -> None:
        """After a case that failed without a fault: what the next case on its ranks must not inherit.

        A case that ran only recorded collectives left its groups in step: re-executing the
        target's module is enough (:meth:`forget_state`).  Any other operation may have left bytes
        on the connection, where a later case stalls on them (seen: DTensor), so those ranks are
        replaced (:meth:`fresh`).
        """
        if outcome.unrecorded:
            self.fresh(outcome.case)
        else:
            self.forget_state(outcome.case)

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
        wait_s = self.outlast(timeout)
        rank_set = self.rank_set(backend, device, world_size)
        return rank_set.call(target, args, wait_s)

    def close(self) -> None:
        raise NotImplementedError


class LocalPool(Pool):
    """Lazily started rank sets, one per (backend, device, world size), reused across cases."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT_S, start_timeout: float = 120.0) -> None:
        self.timeout = timeout
        #: The longest case timeout asked of this pool so far: every set it starts outlasts it.
        self.longest_timeout = timeout
        self.start_timeout = start_timeout
        self.context = forkserver.context()
        _remove_stale_dirs()
        self.tmpdir = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-")
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                   timeout=timedelta(seconds=60))
        self.sets: dict[tuple[str, str, int], RankSet] = {}
        #: A set started in the background for each key that has had a fault (see :meth:`rank_set`).
        self.spares: dict[tuple[str, str, int], list[RankSet]] = {}
        #: A second set for a key whose batches run two at a time (:meth:`twin_set`).
        self.twins: dict[tuple[str, str, int], RankSet] = {}
        self.generation = 0
        self.spawned_sets = 0
        self.max_ranks = local_world_size_limit()
        self.closed = False
        atexit.register(self.close)

    def outlast(self, timeout: float | None) -> float:
        """Stop the sets whose process groups (their timeout fixed at start) would time out within
        the harness's own wait for a call of a longer timeout than any before."""
        wait_s = super().outlast(timeout)
        if wait_s > self.longest_timeout:
            self.longest_timeout = wait_s
            needed = group_timeout_s(wait_s)
            for sets in (self.sets, self.twins):
                for key in [key for key, each in sets.items() if each.group_timeout_s < needed]:
                    sets.pop(key).stop()
            for spares in self.spares.values():
                for spare in [spare for spare in spares if spare.group_timeout_s < needed]:
                    spares.remove(spare)
                    spare.stop()
        return wait_s

    def rank_set(self, backend: str, device: str, world_size: int) -> RankSet:
        """The warm set for this key, replacing it if there is none or it broke.

        After a fault the replacement is the *spare* started in the background, and a new spare
        starts at once: shrinking replaces the set at every step.  Past :attr:`max_ranks` live
        ranks, the least recently used sets stop first (spares first).
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

    def lanes(self, world_size: int) -> int:
        """Two batches at once wherever both sets' ranks fit in memory, even with fewer cores than
        ranks: the other set's ranks run while one waits (measured on 2 cores: 1.4-1.6x as fast)."""
        return 2 if 2 * world_size <= self.max_ranks else 1

    def twin_set(self, backend: str, device: str, world_size: int) -> RankSet:
        key = (backend, device, world_size)
        twin = self.twins.get(key)
        if twin is None or twin.broken:
            self.twins[key] = twin = self._new_set(key)
            twin.await_ready(self.start_timeout)
        return twin

    def existing(self, backend: str, device: str, world_size: int) -> RankSet | None:
        rank_set = self.sets.get((backend, device, world_size))
        return None if rank_set is None or rank_set.broken else rank_set

    def live_ranks(self) -> int:
        return sum(s.world_size for s in [*self.sets.values(), *self._all_spares(), *self.twins.values()]
                   if not s.broken)

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
        every = [*self.sets.values(), *self._all_spares(), *self.twins.values()]
        for rank_set in every:  # all at once: their clean exits overlap
            rank_set.ask_to_stop()
        deadline = time.monotonic() + STOP_S
        for rank_set in every:
            rank_set.await_stopped(deadline)
        self.sets.clear()
        self.spares.clear()
        self.twins.clear()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: A pool's directory for its ranks' logs and stacks is ``<tmp>/gather-harness-<driver pid>-*``.
TMP_PREFIX = "gather-harness-"


def _remove_stale_dirs() -> None:
    """Remove what drivers that died without closing their pool (SIGKILL, OOM, an unhandled SIGTERM)
    left in the temporary directories: their ranks' logs and stacks, their forkserver's socket directory."""
    for root, prefix in ((tempfile.gettempdir(), TMP_PREFIX), (forkserver.socket_base(), forkserver.SOCKET_PREFIX)):
        for name in os.listdir(root):
            pid = name.removeprefix(prefix).split("-", 1)[0]
            if name.startswith(prefix) and pid.isdigit() and not files.pid_alive(int(pid)):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


_SHARED: LocalPool | None = None


def shared_pool() -> LocalPool:
    """The process-wide pool (one per pytest process or CLI run), created on first use; a check's
    timeout travels with its calls, never by changing a pool other checks share."""
    global _SHARED
    if _SHARED is None or _SHARED.closed:
        _SHARED = LocalPool()
    return _SHARED


