"""The batch engine: a search's cases run in batches, judged on the ranks, only a count coming back.

A case run alone costs a round trip to every rank and back with its results; a batch of one
layout's cases costs one (:meth:`harness.pool.pool.Pool.run_batch`): the ranks run its cases
back to back and judge each themselves, the reference computed there.  The fuzz engine's
sweep, the strata and Hypothesis's examples drawn ahead all run through :meth:`BatchEngine.run`;
what a batch that did not pass means (run its cases again the usual way, shrink, confirm) is
the search's, and it is handed each such batch.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from harness import strategies
from harness.core.case import Case
from harness.core.checks import IN_PLACE_NOTE
from harness.core.conventions import Call
from harness.core.procedure import BatchRequest, RunRequest
from harness.pool.pool import Pool
from harness.pool.rankset import BatchRun
from harness.search.finding import Finding
from harness.search.results import Progress

#: Batches hold this many cases at first, doubled while a batch takes under
#: :data:`BATCH_TARGET_S`, up to :data:`MAX_BATCH` (the ranks judge each; only a count comes back).
FIRST_BATCH = 4
MAX_BATCH = 256
BATCH_TARGET_S = 0.2


@dataclass
class BatchEngine:
    """Runs strata in batches on ``pool`` for one search, counting what passed into its
    ``progress`` and ``notes`` (the search's own, shared)."""

    pool: Pool
    target: str
    call: Call
    bits: bool
    timeout_s: float
    progress: Progress
    notes: list[str]
    #: The de facto gradient semantics are counted (each batch's cases report what they matched).
    semantics: collections.Counter[str] | None
    #: Whether a case makes the stability calls (the search's rule, so a replay makes the same calls).
    repeats: Callable[[Case], bool]
    count_semantics: Callable[[Case, frozenset[str] | None], None]
    on_example: Callable[[Progress], None] | None

    def run(self, source: Iterator[strategies.Stratum], pending: dict[tuple, list[strategies.Stratum]],
                    failed: Callable[[list[strategies.Stratum], BatchRun], list[Finding] | None], *,
                    spent: Callable[[], bool] = lambda: False, budget: int | None = None,
                    always_repeat: bool = False) -> list[Finding] | None:
        """Run ``source``'s cases in batches until it runs dry or ``spent()``; ``failed`` is given each
        batch that did not pass, and what it returns, unless ``None``, ends the run and is
        returned.  Cases drawn but not run when ``spent()`` go back to ``pending``.

        Batches hold one rank-set key and layout each, :data:`FIRST_BATCH` cases at first,
        doubled while a round takes under :data:`BATCH_TARGET_S`, up to :data:`MAX_BATCH`; as
        many run at once as the pool has lanes, the next drawn meanwhile.  ``budget``: no more
        examples than that in all.  ``always_repeat``: every case makes the stability calls
        (else where :attr:`repeats` says: one in :data:`harness.search.session.REPEAT_EVERY`, chosen by the case).
        """
        def drawn(size: int) -> list[tuple[list[strategies.Stratum], BatchRequest]]:
            """The next batches with their requests, built while the ranks run the last ones."""
            return [(batch, self._request(batch, always_repeat))
                    for batch in self._next_batches(source, pending, size)]

        size = FIRST_BATCH
        ready = drawn(size)
        while ready:
            if spent():
                for batch, _ in reversed(ready):
                    held = pending.setdefault(batch_key(batch[0].case), [])
                    held[:0] = batch
                return None
            if budget is not None:
                n = max(1, budget - self.progress.searched)
                ready = [(batch[:n], replace(request, requests=request.requests[:n])) for batch, request in ready[:1]]
            following: list[list[tuple[list[strategies.Stratum], BatchRequest]]] = []
            started = time.monotonic()
            results = self.pool.run_batches([request for _, request in ready], timeout=self.timeout_s,
                                            meanwhile=lambda: following.append(drawn(size)))
            took = time.monotonic() - started
            batches = [batch for batch, _ in ready]
            for batch, run in zip(batches, results):
                self.progress.current = batch[-1].case
                if run.passed == len(batch):
                    self._passed(batch, run)
            for batch, run in zip(batches, results):
                if run.passed != len(batch):
                    found = failed(batch, run)
                    if found is not None:
                        return found
            if all(run.passed == len(batch) for batch, run in zip(batches, results)) and took < BATCH_TARGET_S:
                size = min(MAX_BATCH, size * 2)
            ready = following[0] if following else drawn(size)
            if self.on_example is not None:
                self.on_example(self.progress)
        return None

    def _passed(self, batch: list[strategies.Stratum], run: BatchRun) -> None:
        """Count a batch that passed, with what a usual run of its cases notes (as the search's own judging does)."""
        for k, layer in enumerate(batch):
            self.progress.seen.append((layer.case, None))
            if self.semantics is not None and layer.case.grad != "none" and k < len(run.matched):
                self.count_semantics(layer.case, run.matched[k])
        self.progress.examples += len(batch)
        if run.written and IN_PLACE_NOTE not in self.notes:
            self.notes.append(IN_PLACE_NOTE)

    def _request(self, batch: list[strategies.Stratum], always_repeat: bool) -> BatchRequest:
        """The batch's requests, the stability calls where :attr:`repeats` (or ``always_repeat``) says."""
        return BatchRequest(tuple(RunRequest(case=layer.case, target=self.target, call=self.call,
                                             check_grad=layer.case.grad != "none",
                                             repeat=always_repeat or self.repeats(layer.case))
                                  for layer in batch), bits=self.bits, semantics=self.semantics is not None)

    def _next_batches(self, source: Iterator[strategies.Stratum], pending: dict[tuple, list[strategies.Stratum]],
                      size: int) -> list[list[strategies.Stratum]]:
        """The next batch, and as many more of its world size as the pool runs at once
        (:meth:`harness.pool.pool.Pool.lanes`); none once ``source`` has run dry and nothing waits."""
        first = next_batch(source, pending, size)
        if not first:
            return []
        case = first[0].case
        same = (case.backend, case.device, case.world_size)
        more = (next_batch(source, pending, size, same) for _ in range(self.pool.lanes(case.world_size) - 1))
        return [first, *(batch for batch in more if batch)]


def failing(batch: list[strategies.Stratum], run: BatchRun) -> list[strategies.Stratum]:
    """A batch that did not pass, up to the case that failed (all of it where a fault hides which)."""
    return batch if run.passed is None else batch[: run.passed + 1]


def batch_key(case: Case) -> tuple:
    """What one batch's cases share: a rank-set key and a group layout."""
    return case.backend, case.device, case.world_size, case.layout()


def taken(layers: list[strategies.Stratum]) -> Iterator[strategies.Stratum]:
    """``layers`` taken off the list one by one as they are drawn."""
    while layers:
        yield layers.pop(0)


def next_batch(source: Iterator[strategies.Stratum], pending: dict[tuple, list[strategies.Stratum]],
                size: int, key: tuple[str, str, int] | None = None) -> list[strategies.Stratum]:
    """The next ``size`` strata of one rank-set key and group layout (a batch runs on one set, its
    groups made once), of ``key``'s (backend, device, world size) if given; drawn ones of other
    keys wait in ``pending`` for their turn.  Once ``source`` runs dry, fewer; none: ``[]``."""
    dry = False
    while True:
        for held, waiting in pending.items():
            if len(waiting) >= (1 if dry else size) and (key is None or held[:3] == key):
                batch, waiting[:] = waiting[:size], waiting[size:]
                return batch
        if dry:
            return []
        layer = next(source, None)
        if layer is None:  # run dry: what waits goes as it is
            dry = True
        else:
            pending.setdefault(batch_key(layer.case), []).append(layer)
