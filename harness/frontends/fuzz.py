"""``python -m harness fuzz`` and ``python -m harness replay``: long randomized runs, and their findings again.

``fuzz`` searches the whole catalogue (round-robin, each variant against its authors' claim) or
one TARGET until a time budget is spent.  Each turn of a variant is a time slice of the engine
``check`` runs (:func:`harness.frontends.api.execute`), with a fresh seed and the ``fuzz`` profile,
whose example database persists: failures found once are tried first in every later run, on any
machine given the same database.  A variant with a finding leaves the rotation.

The JSON summary is rewritten atomically every ``--save-every`` seconds, after every slice, and
at the end (also on SIGTERM or Ctrl-C), so a killed run loses at most the last few seconds; a
failure still being shrunk is in the database already.  ``replay SUMMARY.json --index N`` runs a
finding's case again.  Exit status of ``fuzz``: 0 nothing found, 1 found, 2 bad arguments, 3 the
harness could not run, 130 interrupted; of ``replay``: 0 none reproduced, 1 one did, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from harness.core.contract import Contract
from harness.core.errors import Exit, Misfit, PoolError, PoolGone, TargetError, UsageError
from harness.frontends.api import (
    CheckOptions,
    Prepared,
    bind,
    execute,
    prepare,
    profile_settings,
    remote_pool,
    target_of,
)
from harness.frontends.arguments import one_line
from harness.pool.pool import Pool, shared_pool
from harness.ranks.targets import shown_target
from harness.report import coverage_page
from harness.report.text import ProgressLine, fuzz_header, fuzz_verdict_text
from harness.search.coverage import Coverage
from harness.search.finding import Finding
from harness.search.results import Progress
from harness.settings import files, profiles
from harness.settings.options import FUZZ_DURATION_S, default, rerun_line, resolved
from harness.variants import CATALOGUE, VariantSpec, by_name

#: A variant's turn lasts its share of the time left, within these bounds: long enough for
#: Hypothesis to get past its database replay and first phases, short enough to rotate.
MIN_SLICE_S = 5.0
MAX_SLICE_S = 120.0
#: Seeds of consecutive slices are this far apart (``run_check`` uses seed, seed+1, ... per batch).
SEED_STRIDE = 1000


class _TurnOver(BaseException):
    """Ends a slice between two examples.

    A ``BaseException`` so that Hypothesis lets it through instead of taking it for a
    failure of the code under test; raised only while nothing has failed in the slice.
    """


# -- what is fuzzed ----------------------------------------------------------------------------------


@dataclass
class Entry:
    """One target in the rotation, checked as ``options`` say (its slices vary the seed and the
    budget), with its tally so far."""

    name: str
    options: CheckOptions
    examples: int = 0
    elapsed_s: float = 0.0
    slices: int = 0
    status: str = "waiting"  # waiting -> fuzzing -> pass | fail | error; or unavailable (never run)
    error: str = ""
    prepared: Prepared | None = None
    coverage: Coverage | None = None

    @property
    def active(self) -> bool:
        return self.status in ("waiting", "fuzzing")

    @property
    def target(self) -> str:
        return self.options.target

    @property
    def contract(self) -> Contract:
        return self.options.contract

    def to_json(self) -> dict:
        return {"name": self.name, "target": self.target, "contract": self.contract.describe(),
                "status": self.status, "examples": self.examples, "elapsed_s": round(self.elapsed_s, 1),
                "slices": self.slices, "error": self.error or None,
                "coverage": None if self.coverage is None else self.coverage.to_json()}


def plan(args: argparse.Namespace) -> list[Entry]:
    """The rotation the options ask for: TARGET alone, or catalogue variants on the chosen backend.

    Either way the options are bound as ``check`` binds them (:func:`harness.frontends.api.bind`:
    ``check``'s defaults where the command leaves a setting unset); a catalogue variant then takes
    its own claim in place of the contract options, which it refuses."""
    if args.target is not None and args.variants:
        raise UsageError("--variants picks catalogue variants; leave it out when fuzzing a TARGET")
    options = bind(vars(args), target_of(args.target) if args.target is not None else "", listen=bool(args.listen))
    if args.target is not None:
        return [Entry(options.target.rpartition(":")[2], options)]
    given = [name for name, value in (("--ragged/--no-ragged", args.ragged), ("--dims", args.dims),
                                      ("--grad", args.grad), ("--dtypes", args.dtypes),
                                      ("--output", None if args.output == default("output") else args.output),
                                      ("--groups/--no-groups", args.groups),
                                      ("--kwarg", args.kwargs or None)) if value is not None]
    if given:
        raise UsageError(f"{given[0]} describes a TARGET; catalogue variants are held to their authors' claims "
                         f"(pick some with --variants a,b)")
    try:
        names = args.variants.split(",") if args.variants not in (None, "all") else []
        specs = [by_name(name.strip()) for name in names] or list(CATALOGUE)
    except KeyError as exc:
        raise UsageError(f"--variants: {exc.args[0]}") from None
    contract = options.contract
    on_backend = {"backends": contract.backends, "devices": contract.devices, "world_sizes": contract.world_sizes,
                  "bits": contract.bits, "compile": contract.compile}  # how they run, not what they claim
    return [_catalogue_entry(spec, replace(options, target=spec.target, contract=spec.contract.with_(**on_backend)))
            for spec in specs]


def _catalogue_entry(spec: VariantSpec, options: CheckOptions) -> Entry:
    """A variant's place in the rotation; one the installed torch cannot run never enters it."""
    missing = spec.unavailable()
    if missing:
        return Entry(spec.name, options, status="unavailable", error=missing)
    return Entry(spec.name, options)


# -- the budget and the summary ----------------------------------------------------------------------


@dataclass
class Budget:
    """When the run ends: a deadline, an example cap, or both."""

    duration_s: float | None
    max_examples: int | None
    started: float = field(default_factory=time.monotonic)

    def left_s(self) -> float:
        return float("inf") if self.duration_s is None else self.duration_s - (time.monotonic() - self.started)

    def spent(self, examples: int) -> bool:
        return self.left_s() <= 0 or (self.max_examples is not None and examples >= self.max_examples)

    def slice_s(self, active: int) -> float:
        """This turn's length: a fair share of the time left, within the slice bounds."""
        share = min(MAX_SLICE_S, max(MIN_SLICE_S, self.left_s() / max(1, active)))
        return max(0.0, min(share, self.left_s()))


@dataclass
class Summary:
    """The run as JSON (and as a coverage page, ``html``), rewritten atomically at most every
    ``every_s`` unless forced: a running fuzz's page shows its progress."""

    path: str
    every_s: float
    settings: dict
    entries: list[Entry]
    html: str | None = None
    findings: list[dict] = field(default_factory=list)
    #: Hangs and crashes no replay reproduced (:meth:`harness.search.results.CheckReport.warnings`): not findings.
    warnings: list[str] = field(default_factory=list)
    status: str = "running"
    error: str = ""
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: _now())
    saved_at: float = float("-inf")

    @property
    def examples(self) -> int:
        return sum(entry.examples for entry in self.entries)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "verdict": "fail" if self.findings else "pass",
            "found": len(self.findings),
            "examples": self.examples,
            "elapsed_s": round(time.monotonic() - self.started, 1),
            "started_at": self.started_at,
            "updated_at": _now(),
            **self.settings,
            "error": self.error or None,
            "targets": [entry.to_json() for entry in self.entries],
            "findings": self.findings,
            "warnings": self.warnings,
        }

    def coverage(self) -> Coverage:
        """What every target's examples reached so far, added up."""
        covered = [entry.coverage for entry in self.entries if entry.coverage is not None]
        merged = covered[0] if covered else Coverage()
        for coverage in covered[1:]:
            merged = merged.merge(coverage)
        return merged

    def save(self, *, force: bool = False) -> None:
        if force or time.monotonic() - self.saved_at >= self.every_s:
            document = self.to_json()
            files.write_json(self.path, {**document, "coverage": self.coverage().to_json()})
            if self.html:
                coverage_page.write(self.html, self.coverage(), self._page_header(document), self.findings)
            self.saved_at = time.monotonic()

    def _page_header(self, document: dict) -> dict[str, str]:
        names = ", ".join(entry.name for entry in self.entries)
        return {"status": "running" if self.status == "running" else "finished", "target": names,
                "backend/device": f"{document['backend']}/{document['device']}",
                "world sizes": "-".join(map(str, document["world_sizes"])), "torch": torch.__version__,
                "seed": str(document["seed"]), "examples": str(document["examples"]),
                "duration": f"{document['elapsed_s']:.0f} s of "
                            + (f"{document['duration_s']:g} s" if document["duration_s"] else "unbounded"),
                "summary": os.path.abspath(self.path)}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


# -- the loop ---------------------------------------------------------------------------------------------


@dataclass
class Fuzzer:
    """Round-robin over the entries until the budget is spent or every entry has left the rotation."""

    entries: list[Entry]
    summary: Summary
    budget: Budget
    pool: Pool
    seed: int
    show: Callable[[Progress], None] | None = None
    #: Set by SIGTERM or SIGINT: the run ends after the example in flight.
    stop: threading.Event = field(default_factory=threading.Event)
    turns: int = 0

    def run(self) -> None:
        """Turn after turn until the budget is spent; entries still in the rotation then pass.

        The budget starts now, after the set-up.  Every entry gets a first turn, of at least
        one example, however small the budget: a run over the catalogue touches every variant.
        """
        self.budget.started = time.monotonic()
        first_round = True
        try:
            while first_round or not self.budget.spent(self.summary.examples):
                active = [entry for entry in self.entries if entry.active]
                for entry in active:
                    if not first_round and self.budget.spent(self.summary.examples):
                        return
                    self.turn(entry, self.budget.slice_s(len(active)))
                first_round = False
                if not active:
                    return
        finally:
            for entry in self.entries:
                if entry.status == "fuzzing":
                    entry.status = "pass"

    def prepare(self, entry: Entry) -> Prepared:
        """Measure the backend and probe the target's calling convention (once per entry)."""
        if entry.prepared is None:
            entry.prepared = prepare(self._options(entry, None), self.pool)
            contract = entry.prepared.probe.contract
            drawn = tuple(name for name in contract.dtypes if name not in entry.prepared.not_drawn)
            entry.coverage = Coverage.for_contract(contract, drawn)
        return entry.prepared

    def turn(self, entry: Entry, slice_s: float) -> None:
        """One slice of ``entry``: a search with a fresh seed that ends on time or on a finding."""
        options = self._options(entry, slice_s)
        started, before = time.monotonic(), entry.examples
        entry.status = "fuzzing"
        report = None
        try:
            report = execute(options, self.pool, self.prepare(entry), on_example=self._watch(entry, before, slice_s))
        except _TurnOver:
            pass
        except (TargetError, UsageError, Misfit) as exc:
            entry.status, entry.error = "error", one_line(exc)
        finally:
            entry.slices += 1
            entry.elapsed_s += time.monotonic() - started
        if report is not None:
            self._record(entry, report.findings, report.misuse_findings, started)
            self.summary.warnings += [f"{entry.name}: {line}" for line in report.warnings()]
        self.summary.save(force=True)

    def _options(self, entry: Entry, slice_s: float | None) -> CheckOptions:
        """The ``check`` options of the next turn: its time slice (the run's example cap is the
        :class:`Budget`'s), and a seed no earlier turn used."""
        self.turns += 1
        return replace(entry.options, max_examples=None, duration_s=slice_s,
                       seed=self.seed + SEED_STRIDE * self.turns, batches=True)

    def _watch(self, entry: Entry, before: int, slice_s: float) -> Callable[[Progress], None]:
        """The per-example callback: tally, progress line, periodic save, and the end of the turn.

        A slice with ``--probe-misuse`` runs two searches (in-contract, then out-of-contract),
        each with its own :class:`Progress`; each gets its share of the slice.  Once either
        has failed the slice runs to its end: ending it early would lose the findings.
        """
        phase_s = slice_s / 2 if entry.options.probe_misuse else slice_s
        phases: dict[int, tuple[float, Progress]] = {}  # id(progress) -> (its deadline, it)

        recorded: dict[int, int] = {}  # id(progress) -> how many of its cases are in the coverage

        def watch(progress: Progress) -> None:
            if self.stop.is_set():
                raise KeyboardInterrupt
            deadline = phases.get(id(progress), (time.monotonic() + phase_s,))[0]
            phases[id(progress)] = (deadline, progress)
            entry.examples = before + sum(seen.examples for _, seen in phases.values())
            if entry.coverage is not None:
                for case, failed in progress.seen[recorded.get(id(progress), 0):]:
                    entry.coverage.record(case, failed)
                recorded[id(progress)] = len(progress.seen)
            if self.show is not None:
                self.show(Progress(examples=self.summary.examples, failures=len(self.summary.findings),
                                   started=self.summary.started, current=progress.current))
            self.summary.save()
            out_of_time = time.monotonic() >= deadline or self.budget.spent(self.summary.examples)
            if out_of_time and not any(seen.failures for _, seen in phases.values()):
                raise _TurnOver

        return watch

    def _record(self, entry: Entry, findings: list[Finding], misuse: list[Finding], started: float) -> None:
        for is_misuse, found in ((False, findings), (True, misuse)):
            for finding in found:
                self.summary.findings.append(self._finding_json(entry, finding, is_misuse, started))
        if findings or misuse:
            entry.status = "fail"

    def _finding_json(self, entry: Entry, finding: Finding, is_misuse: bool, started: float) -> dict:
        index = len(self.summary.findings)
        return {"index": index, "name": entry.name, "target": entry.target, "contract": entry.contract.describe(),
                **finding.to_json(), "out_of_contract": is_misuse,  # the summary's public key
                "found_after_s": round(started - self.summary.started, 1),
                "replay": f"python -m harness replay {self.summary.path} --index {index}"}


# -- the commands ------------------------------------------------------------------------------------------


def run_fuzz_command(args: argparse.Namespace) -> int:
    """``fuzz``: see the module docstring."""
    files.check_writable("--json", args.json)
    files.check_writable("--html", args.html)
    if args.database:
        os.environ[profiles.DATABASE_ENV] = args.database  # the profiles read it when registered
    entries = plan(args)
    options = entries[0].options
    seed = random.randrange(1_000_000) if options.seed is None else options.seed
    duration = FUZZ_DURATION_S if options.duration_s is None and options.max_examples is None else options.duration_s
    contract = options.contract
    pool = (remote_pool(args.listen, contract, timeout=options.timeout, connect_timeout=args.connect_timeout,
                        address_file=args.address_file) if args.listen else shared_pool())
    database = getattr(profile_settings(options.profile).database, "path", None)
    command = {**resolved(vars(args), "fuzz"), "world_sizes": contract.world_sizes, "duration": duration,
               **{name: getattr(args, name) for name in ("variants", "listen", "connect_timeout")}}
    settings = {"command": rerun_line("fuzz", command, seed, args.target and shown_target(options.target)),
                "seed": seed, "backend": contract.backend,
                "device": contract.device, "world_sizes": list(contract.world_sizes), "profile": options.profile,
                "database": str(database) if database else None, "duration_s": duration}
    summary = Summary(args.json, args.save_every, settings, entries,
                      html=args.html or str(Path(args.json).with_suffix(".html")))
    fuzzer = Fuzzer(entries, summary, Budget(duration, options.max_examples), pool, seed)
    if args.target is not None:
        fuzzer.prepare(entries[0])  # a TARGET that cannot be loaded is a usage error (2), as in check
    if not args.quiet:
        print(fuzz_header(settings, [entry.name for entry in entries], options.max_examples, summary.path,
                          summary.every_s), flush=True)
    progress = None if args.quiet else ProgressLine(label="  ")
    fuzzer.show = progress
    with _interruptible_once(fuzzer.stop):
        try:
            fuzzer.run()
            summary.status = "interrupted" if fuzzer.stop.is_set() else "finished"
        except KeyboardInterrupt:
            summary.status = "interrupted"
        except (PoolError, PoolGone) as exc:
            summary.status, summary.error = "error", one_line(exc)
            raise
        finally:
            if progress is not None:
                progress.close()
            summary.save(force=True)
    print(fuzz_verdict_text(summary.to_json(), summary.path, full_stacks=options.full_stacks))
    if not args.quiet:
        print("\n" + summary.coverage().summary() + f"\ncoverage page: {os.path.abspath(summary.html or '')}")
    if summary.findings:
        return Exit.COUNTEREXAMPLE
    return Exit.INTERRUPTED if summary.status == "interrupted" else Exit.PASS


@contextlib.contextmanager
def _interruptible_once(stop: threading.Event) -> Iterator[None]:
    """The first SIGTERM or SIGINT sets ``stop``; the run ends at the next example; later ones are ignored.

    Not an exception raised from the handler: a signal can land inside a garbage-collector
    callback or a ``__del__``, where Python drops an exception ("Exception ignored in...") and
    the run would go on.  The fuzzer checks ``stop`` after every example (a case takes at most
    its timeout) and ends the run as ``KeyboardInterrupt`` from there, so the summary is
    written and the ranks are stopped however the run is ended.
    """
    caught = (signal.SIGTERM, signal.SIGINT)

    def interrupt(signum: int, frame: Any) -> None:
        for number in caught:
            signal.signal(number, signal.SIG_IGN)
        stop.set()

    previous = {number: signal.signal(number, interrupt) for number in caught}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
