"""``python -m harness report``: every catalogue variant against its authors' claim, in one table.

Each variant (``harness.variants.CATALOGUE``) gets the search ``check`` runs; the table and its
notes are :mod:`harness.report.catalogue_table`.  The table is the same on every run, on a quiet
machine or a loaded one: each variant has a fixed seed and no example database, shrinking is
bounded by counts (:data:`SHRINK_FAULT_STEPS`), never by seconds, only findings that fail on
every replay enter it, and a known torch race's dtypes are not drawn (``VariantSpec.race``).
A variant the installed torch cannot run is not started; its row says why.

Two variants run at a time (:func:`check_all`): this process checks one share, a worker process
the other on its own pool, on a plan made from the specs alone (:func:`plan`).

Exit status: 0 every available variant's verdict obtained, 3 some variant could not be checked
(the harness's failure, not a finding), 2 bad arguments.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

import torch

from harness.core.errors import Exit, UsageError
from harness.frontends import api
from harness.pool import capabilities, forkserver
from harness.pool.machine import check_machine, within_gpus
from harness.pool.pool import LocalPool, Pool, shared_pool
from harness.report import coverage_page
from harness.report.catalogue_table import (
    HEADER,
    Row,
    capability_cells,
    collective_sections,
    heading_markdown,
    intermittent_lines,
    merged_coverage,
    not_checked_lines,
    text_report,
    variant_seed,
)
from harness.report.text import ProgressLine, markdown_table, write_step_summary
from harness.settings.files import write_json
from harness.settings.options import resolved
from harness.variants import CATALOGUE, VariantSpec, by_name

#: Shrinking is bounded by counts, never by seconds, so a loaded machine prints the table a quiet
#: one does: at most this many shrinking steps that hung, crashed or desynced per failing
#: property (each waits for a timeout or a fresh rank set) ...
SHRINK_FAULT_STEPS = 40
#: The ``ci`` profile: no example database, whose contents would vary the table between runs.
REPORT_PROFILE = "ci"
#: Each variant's cases one by one, not in batches (:attr:`harness.frontends.api.CheckOptions.ahead`): most
#: variants fail, and a failing check pays for its batches and then for the usual run (the
#: batches gave the same table, 60 of 60 rows, in 124 s against 77 s).
REPORT_AHEAD = False
#: The environment variable that sets how many variants run at once (default :func:`default_jobs`).
JOBS_ENV = "GATHER_HARNESS_REPORT_JOBS"


def default_jobs() -> int:
    """Variants checked at once (``$GATHER_HARNESS_REPORT_JOBS``, else one per core, at most two).

    The table does not depend on it (the same bytes with one worker and with two).
    """
    text = os.environ.get(JOBS_ENV, "")
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    return max(1, min(2, os.cpu_count() or 1))


#: What a variant costs, in seconds with two workers on two cores (measured with ``report --json``):
#: the plan that shares the variants between the workers is made from these, longest first, so
#: that it is the same on every run.  A variant not listed counts as :data:`COST_S`.
COSTS_S: dict[str, float] = {
    "rs_reduce_scatter_list": 7, "a2a_nn_all_to_all": 7, "rs_nn_reduce_scatter": 6, "dtensor_redistribute_uneven": 5,
    "funcol_all_gather_into_tensor_coalesced": 4, "rs_reduce_scatter_tensor": 4, "lucidrains_all_reduce": 4,
    "rs_megatron_ragged": 4, "bolts_sync_function": 4,
}
COST_S = 2.0
#: A worker process's start (imports, its own rank forkserver), counted in the plan.
WORKER_START_S = 4.0








def run(values: Mapping[str, Any] | None = None, *, markdown: bool = False, jobs: int | None = None) -> int:
    """Check the selected variants, print the table and the capability matrix; 0 if all were checked, 3 if
    the harness could not check one (its row says why: that is no verdict on the variant).

    ``values`` are the command's options (``python -m harness report --help``), bound as every
    front end binds them (:func:`~harness.settings.options.resolved`, ``report``'s defaults):
    ``variants`` a comma list of catalogue names (``None``: all), each checked on the backend and
    device at ``world_sizes`` (``None``: its own, within the GPUs for nccl).  Each variant runs
    with its own fixed seed and no example database, so the same versions print the same table.
    ``jobs`` variants run at once (:func:`check_all`; ``None``: :func:`default_jobs`).
    """
    values = values or {}
    settings = resolved(values, "report")
    check_machine(settings["backend"], settings["device"], settings["world_sizes"] or (1, 1))
    backend, device, quiet = settings["backend"], settings["device"], settings["quiet"]
    max_examples, json_path, html_path = settings["max_examples"], settings["json"], settings["html"]
    specs = [on_machine(spec, backend, device, settings["world_sizes"]) for spec in select(values.get("variants"))]
    pool = shared_pool()
    started = time.monotonic()
    rows = check_all(specs, pool, jobs=default_jobs() if jobs is None else jobs, settings=settings, quiet=quiet)
    elapsed = time.monotonic() - started
    caps = capabilities.measure(pool, backend, device)
    header = [column for column in HEADER if settings["probe_misuse"] or column != "misuse"]
    sections = collective_sections(rows, header)
    notes = intermittent_lines(rows) + [not_checked_lines()]
    as_markdown = "\n\n".join([*(heading_markdown(title) + markdown_table(header, table) for title, table in sections),
                                *notes, f"```text\n{caps.table()}\n```"])
    print(as_markdown if markdown else text_report(sections, header, notes, caps.table()))
    merged = merged_coverage(rows)
    if not quiet:
        unavailable = sum(1 for row in rows if row.unavailable)
        skipped = f" ({unavailable} unavailable on torch {torch.__version__})" if unavailable else ""
        print(f"\nchecked {len(rows) - unavailable} variant(s){skipped} in {elapsed:.0f} s\n{merged.summary()}")
    if json_path:
        write_json(json_path, {"torch": torch.__version__, "max_examples": max_examples, "elapsed_s": round(elapsed, 1),
                               "capabilities": capability_cells(caps), "variants": [row.to_json() for row in rows]})
    if html_path:
        findings = [finding.to_json() | {"message": f"{row.spec.name}: {finding.message}"}
                    for row in rows if row.report for finding in row.report.findings]
        coverage_page.write(html_path, merged, {"status": "finished", "target": f"catalogue ({len(rows)} variants)",
                                                "torch": torch.__version__, "examples per variant": str(max_examples),
                                                "duration": f"{elapsed:.0f} s"}, findings)
    write_step_summary("### gather-harness catalogue report\n\n" + as_markdown)
    could_not_check = any(row.report is None and not row.unavailable for row in rows)
    return Exit.HARNESS if could_not_check else Exit.PASS


# -- running the variants, several at a time -----------------------------------------------------------------

def plan(specs: list[VariantSpec], jobs: int) -> list[list[int]]:
    """Which worker checks which variants (indices into ``specs``, each share in catalogue order).

    Longest first (:data:`COSTS_S`), each to the worker that would finish first; worker 0 is this
    process, the others start :data:`WORKER_START_S` late.  Made from the specs alone, so it is the
    same on every run: every variant runs after the same others, on a pool of the same history.
    """
    jobs = max(1, min(jobs, len(specs)))
    loads = [0.0] + [WORKER_START_S] * (jobs - 1)
    shares: list[list[int]] = [[] for _ in range(jobs)]
    for index in sorted(range(len(specs)), key=lambda i: -COSTS_S.get(specs[i].name, COST_S)):
        worker = min(range(jobs), key=lambda w: loads[w])
        shares[worker].append(index)
        loads[worker] += COSTS_S.get(specs[index].name, COST_S)
    return [sorted(share) for share in shares]


def check_all(specs: list[VariantSpec], pool: Pool, *, jobs: int, **options: Any) -> list[Row]:
    """Every variant's row, in the order of ``specs``: ``jobs`` variants at a time, the first share
    here on ``pool``, each other share by a worker process with its own pool (:func:`_worker`).

    A finished variant's summary line goes to stderr (unless ``quiet``) as it comes; the live
    progress line only when one variant runs at a time.  However the report ends (Ctrl-C
    included), the workers are stopped, and with them their ranks.
    """
    quiet = options["quiet"]
    shares = [share for share in plan(specs, jobs) if share]  # a few variants: no worker to start
    label = lambda i: f"[{i + 1}/{len(specs)}] {specs[i].name}: "  # noqa: E731
    if len(shares) <= 1:
        return [check_variant(spec, pool, label(i), **options) for i, spec in enumerate(specs)]
    rows: list[Row | None] = [None] * len(specs)
    workers = [_Worker(specs, share, options, os.getpid()) for share in shares[1:]]
    try:
        for worker in workers:
            worker.start(rows, None if quiet else label)
        for i in shares[0]:
            rows[i] = check_variant(specs[i], pool, label(i), live=False, **options)
        for worker in workers:
            worker.join()
    finally:
        for worker in workers:
            worker.stop()
    for worker in workers:
        for i in worker.share:
            if rows[i] is None:
                rows[i] = Row(specs[i], None, f"the worker process checking it ended first ({worker.ended()})")
    return [row for row in rows if row is not None]


class _Worker:
    """A process that checks a share of the variants on its own pool and sends each row back."""

    def __init__(self, specs: list[VariantSpec], share: list[int], options: dict[str, Any], driver_pid: int) -> None:
        self.share = share
        context = forkserver.context()  # torch is imported there already: the process starts at once
        self.conn, child_end = context.Pipe(duplex=False)
        self.process = context.Process(target=_worker, name="gather-harness-report-worker",
                                       args=(child_end, [(i, specs[i]) for i in share], options, driver_pid))
        self._child_end = child_end
        self.reader: threading.Thread | None = None

    def start(self, rows: list[Row | None], label: Any) -> None:
        self.process.start()
        self._child_end.close()
        self.reader = threading.Thread(target=self._read, args=(rows, label), daemon=True, name="report-worker-reader")
        self.reader.start()

    def _read(self, rows: list[Row | None], label: Any) -> None:
        while True:
            try:
                index, row = self.conn.recv()
            except (EOFError, OSError):
                return
            rows[index] = row
            if label is not None:
                sys.stderr.write(label(index) + row.summary() + "\n")
                sys.stderr.flush()

    def join(self) -> None:
        if self.reader is not None:
            self.reader.join()
        self.process.join()

    def stop(self) -> None:
        """Stop the process if it still runs: SIGTERM (it closes its pool), then SIGKILL."""
        if self.process.pid is None:
            return
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_WORKER_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()

    def ended(self) -> str:
        code = self.process.exitcode
        return "still running" if code is None else f"exit status {code}" if code >= 0 else f"signal {-code}"


#: How long a worker may take to close its pool when told to stop, before it is killed.
STOP_WORKER_S = 10.0


def _worker(conn: Connection, share: list[tuple[int, VariantSpec]], options: dict[str, Any], driver_pid: int) -> None:
    """A worker process: check ``share`` on a pool of its own, sending ``(index, row)`` after each.

    It ends with the driver however that ends: Ctrl-C is the driver's (a process forked from the
    rank forkserver ignores it, :mod:`harness.ranks._fast_exit`), which then sends SIGTERM, and the
    worker closes its pool (its ranks stop); a watchdog ends it if the driver dies without a word.
    """
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    forkserver.start()  # its ranks' own, forked from it while it has no thread, as the command line's is
    signal.signal(signal.SIGTERM, stop)
    threading.Thread(target=_watch_driver, args=(driver_pid,), daemon=True, name="driver-watchdog").start()
    pool: LocalPool | None = None
    try:
        pool = LocalPool()
        for index, spec in share:
            conn.send((index, check_variant(spec, pool, "", live=False, **{**options, "quiet": True})))
    except (KeyboardInterrupt, BrokenPipeError, EOFError):
        pass
    finally:
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, signal.SIG_IGN)  # the pool's close must not be cut short
        if pool is not None:
            pool.close()
        forkserver.stop()  # a multiprocessing child runs no atexit handlers
        conn.close()


def _watch_driver(driver_pid: int) -> None:
    while True:
        try:
            os.kill(driver_pid, 0)
        except ProcessLookupError:
            os.kill(os.getpid(), signal.SIGTERM)
            return
        time.sleep(0.5)



def select(names: str | None) -> list[VariantSpec]:
    """The catalogue entries named in ``names`` (all when ``None``), in the order given."""
    if names is None:
        return list(CATALOGUE)
    try:
        return [by_name(name.strip()) for name in names.split(",") if name.strip()]
    except KeyError as exc:
        raise UsageError(f"--variants: {exc.args[0]}") from None


def on_machine(spec: VariantSpec, backend: str, device: str, world_sizes: tuple[int, int] | None) -> VariantSpec:
    """``spec`` checked where the command asks: its claim is the same on any backend and device."""
    sizes = world_sizes or within_gpus(spec.contract.world_sizes, backend)
    return dataclasses.replace(spec, contract=spec.contract.with_(backends=(backend,), devices=(device,),
                                                                   world_sizes=sizes))


def check_variant(spec: VariantSpec, pool: Pool, label: str, *, settings: Mapping[str, Any], quiet: bool,
                  live: bool = True) -> Row:
    """One variant's search with the budget of ``settings`` (:func:`run`'s); an error that stops it
    becomes the row's ``error``, not the end of the report.

    A variant the installed torch cannot run is not started: its row says why.  The dtypes of a
    known torch race (``spec.race``) are not drawn.  ``live``: the progress line while it runs
    (its summary line, unless ``quiet``, either way).
    """
    missing = spec.unavailable()
    if missing:
        row = Row(spec, None, unavailable=missing)
        if not quiet:
            print(label + row.summary(), file=sys.stderr)
        return row
    progress = None if quiet or not live else ProgressLine(label=label)
    contract = spec.contract
    if spec.race is not None and set(contract.dtypes) - set(spec.race.dtypes):
        contract = contract.with_(dtypes=tuple(d for d in contract.dtypes if d not in spec.race.dtypes))
    try:
        options = api.CheckOptions(spec.target, contract, max_examples=settings["max_examples"],
                                   timeout=settings["timeout"], probe_misuse=settings["probe_misuse"],
                                   seed=variant_seed(spec.name), profile=REPORT_PROFILE, annotate=False,
                                   shrink_fault_steps=SHRINK_FAULT_STEPS, ahead=REPORT_AHEAD)
        report = api.execute(options, pool, api.prepare(options, pool), on_example=progress)
    except Exception as exc:  # one broken variant must not cost the other rows
        row = Row(spec, None, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    else:
        row = Row(spec, report)
    if progress is not None:
        progress.close()
    if not quiet:
        print(label + row.summary(), file=sys.stderr)
    return row






