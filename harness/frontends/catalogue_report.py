"""``python -m harness report``: every catalogue variant against its authors' claim, in one table.

For each variant (``harness.variants.CATALOGUE``) it runs the same search as ``check`` with
``track_semantics=True`` and prints: the variant, its claimed contract, the verdict on
in-contract input, the failing properties (tagged when a failure needs earlier cases or
ranks whose layouts differ), the minimal counterexample in one line, the gradient semantics
it really has (de facto, over cases whose ranks share one layout) and the out-of-contract
behaviour (with ``--probe-misuse``); then the findings that failed in some replays only
(intermittent: listed, never in the table), the backend's capability matrix, and with
``--html`` the coverage page of the whole report.

The table is reproducible: every variant runs with a fixed seed (:func:`variant_seed`) and no
example database, shrinking is bounded by counts (:data:`SHRINK_FAULT_STEPS`,
:data:`MAX_SHRINK_STEPS`), never by seconds, only findings that fail on every replay enter it,
and a variant with a known torch race (``VariantSpec.race``) does not draw the racy part of its
contract and says so the same way every run; so the same versions print the same table on every
run, on a quiet machine or a loaded one.  Two variants can run at a time (:func:`check_all`): this
process checks one share on its pool, a worker process the other on its own, on a plan made from
the specs alone (:func:`plan`), and the table is printed in catalogue order; one at a time on
a one-core machine (:func:`default_jobs`).  The text fits
:data:`WIDTH` columns (:func:`text_report`).

A variant whose torch path the installed release lacks (``VariantSpec.needs``, e.g. the public
DTensor module before torch 2.5) is not run: its row says ``unavailable: needs torch >= X.Y``
(JSON verdict ``unavailable``), and the other rows are unaffected.

The report is informational (the expected verdicts are asserted by the project's tests):
exit status 0 when every available variant's verdict was obtained, 3 when some variant could
not be checked at all (verdict ``error``: the harness's failure, not a finding), 2 on bad arguments.

Budget: :data:`~harness.settings.options.REPORT_MAX_EXAMPLES` = 60 examples per variant (what the whole catalogue costs
is in docs/report.md).  Misuse probes are off by default: equal-only variants given ragged input hang by
design, and every hanging example costs the full timeout.

One concern: the ``report`` command, from the plan that shares the variants between workers to the
table; each row's search is the one ``check`` runs.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import textwrap
import threading
import time
import zlib
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch

from harness.core.contract import COLLECTIVES, Contract
from harness.core.errors import Exit, UsageError
from harness.frontends import api
from harness.pool import capabilities, forkserver
from harness.pool.machine import within_gpus
from harness.pool.pool import LocalPool, Pool, shared_pool
from harness.report import coverage_page
from harness.report.text import ProgressLine, markdown_table, write_step_summary
from harness.search.coverage import Coverage
from harness.search.finding import Finding
from harness.search.results import CheckReport
from harness.search.shrinking import MAX_SHRINK_STEPS
from harness.settings.files import write_json
from harness.settings.options import REPORT_MAX_EXAMPLES, REPORT_TIMEOUT_S
from harness.variants import CATALOGUE, NOT_CHECKED, VariantSpec, by_name

#: Shrinking is bounded by counts, never by seconds, so a loaded machine prints the table a quiet
#: one does: at most this many shrinking steps that hung, crashed or desynced per failing
#: property (each waits for a timeout or a fresh rank set) ...
SHRINK_FAULT_STEPS = 40
NOT_PROBED = "not probed"
#: The ``ci`` profile: no example database, whose contents would vary the table between runs.
REPORT_PROFILE = "ci"
#: Each variant's cases one by one, not in batches (:attr:`harness.frontends.api.CheckOptions.ahead`): most
#: variants fail, and a failing check pays for its batches and then for the usual run (the
#: batches gave the same table, 60 of 60 rows, in 124 s against 77 s).
REPORT_AHEAD = False
HEADER = ("variant", "claimed", "verdict", "failing", "minimal counterexample", "de facto grad", "misuse")
#: The text table's header: the minimal case is a numbered note under the table.
TEXT_HEADER = {"minimal counterexample": "minimal case"}
#: The text output fits this many columns: long cells are folded at spaces, minimal cases moved to notes.
WIDTH = 120
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


def variant_seed(name: str) -> int:
    """Each variant's fixed seed: the same versions give the same table on every run."""
    return zlib.crc32(name.encode()) & 0xFFFFFF


@dataclass
class Row:
    """One variant's outcome: its report, or why it could not be checked (``error``) or was not
    run because the installed torch lacks its path (``unavailable``)."""

    spec: VariantSpec
    report: CheckReport | None
    error: str = ""
    unavailable: str = ""

    def reproducible(self) -> list[Finding]:
        """The findings that fail on every replay (alone or after their history): the table's."""
        return [finding for finding in self.report.findings if finding.reproducible()] if self.report else []

    def intermittent(self) -> list[Finding]:
        """Findings that failed in some replays only: listed under the table, never in it."""
        if self.report is None:
            return []
        return [finding for finding in self.report.findings + self.report.misuse_findings
                if not finding.reproducible()]

    def cells(self) -> dict[str, str]:
        """The row, keyed by :data:`HEADER`."""
        name, claimed = self.spec.name, short_contract(self.spec.contract)
        report = self.report
        if report is None:
            verdict = "unavailable" if self.unavailable else "error"
            values = [name, claimed, verdict, "", self.unavailable or self.error, "", ""]
        else:
            findings = self.reproducible()
            failing = ", ".join(finding.property + _tag(finding) for finding in findings)
            minimal = findings[0].case.describe() if findings else ""
            verdict = "fail" if findings else "pass"
            race = self.spec.race
            if race is not None:  # the same every run: the spec's, not this run's timing
                verdict = verdict if findings else f"intermittent (torch race: {race.doc})"
                failing = ", ".join([*([failing] if failing else []), f"{race.shows} (torch race)"])
                minimal = minimal or f"{', '.join(race.dtypes)} not drawn: a race decides there"
            values = [name, claimed, verdict, failing, minimal, report.de_facto_semantics(), misuse_cell(report)]
        return dict(zip(HEADER, values))

    def summary(self) -> str:
        """E.g. ``fail: gradients; misuse: desync (12.3 s)`` for the progress log."""
        if self.report is None:
            return f"unavailable: {self.unavailable}" if self.unavailable else f"not checked: {self.error}"
        cell = self.cells()
        failing = f": {cell['failing']}" if cell["failing"] else ""
        misuse = "" if cell["misuse"] == NOT_PROBED else f"; misuse: {cell['misuse']}"
        flaky = f"; {len(self.intermittent())} intermittent" if self.intermittent() else ""
        return f"{cell['verdict']}{failing}{misuse}{flaky} ({self.report.elapsed_s:.1f} s)"

    def to_json(self) -> dict:
        base = {"name": self.spec.name, "target": self.spec.target, "origin": self.spec.origin,
                "claimed": self.spec.contract.describe(), "seed": variant_seed(self.spec.name)}
        if self.report is None and self.unavailable:
            return {**base, "verdict": "unavailable", "unavailable": self.unavailable}
        if self.report is None:
            return {**base, "verdict": "error", "error": self.error}
        cell = self.cells()
        return {**base, **self.report.to_json(), "in_contract_verdict": cell["verdict"], "misuse": cell["misuse"],
                "intermittent": [finding.to_json() for finding in self.intermittent()]}


def _tag(finding: Finding) -> str:
    """What the table says beside a failing property: how it fails, when that is not plain."""
    tags = []
    if finding.status == "history-dependent":
        tags.append("after earlier cases")
    if finding.condition.startswith("fails only when"):
        tags.append(finding.condition.split(" (")[0].removeprefix("fails "))
    return f" ({'; '.join(tags)})" if tags else ""


def run(*, variants: str | None = None, max_examples: int = REPORT_MAX_EXAMPLES, probe_misuse: bool = False,
        timeout: float = REPORT_TIMEOUT_S, markdown: bool = False, json_path: str | None = None,
        html_path: str | None = None, quiet: bool = False, backend: str = "gloo", device: str = "cpu",
        world_sizes: tuple[int, int] | None = None, jobs: int | None = None) -> int:
    """Check the selected variants, print the table and the capability matrix; 0 if all were checked, 3 if
    the harness could not check one (its row says why: that is no verdict on the variant).

    ``variants`` is a comma list of catalogue names (``None``: all); each is checked on
    ``backend``/``device`` at ``world_sizes`` (``None``: its own, within the GPUs for nccl); the
    rest are the command's options (see ``python -m harness report --help``).  Each variant runs with its
    own fixed seed and no example database, so the same versions print the same table.  ``jobs``
    variants run at once (:func:`check_all`; ``None``: :func:`default_jobs`).
    """
    specs = [on_machine(spec, backend, device, world_sizes) for spec in select(variants)]
    pool = shared_pool()
    started = time.monotonic()
    rows = check_all(specs, pool, jobs=default_jobs() if jobs is None else jobs, max_examples=max_examples, probe_misuse=probe_misuse, timeout=timeout,
                     quiet=quiet)
    elapsed = time.monotonic() - started
    caps = capabilities.measure(pool, backend, device)
    header = [column for column in HEADER if probe_misuse or column != "misuse"]
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


# -- the text --------------------------------------------------------------------------------------------

INTRO = ("Each catalogue variant (a published all_gather, reduce-scatter or all-to-all recipe) checked on real "
         "ranks against what its authors claim for it: the verdict on in-contract input, the properties that "
         "failed, the minimal case that fails them (numbered notes under each table) and the gradient it really "
         "has (de facto grad). Check your own gather next, written as it is (its contract's options: "
         "python -m harness check --help):")
#: The command :data:`INTRO` ends with, on a line of its own.
NEXT_COMMAND = "python -m harness check path/to/your_file.py:your_gather --grad sum"


def text_report(sections: list[tuple[str, list[list[str]]]], header: list[str], notes: list[str], caps: str) -> str:
    """The report as text, every line within :data:`WIDTH` columns: the intro, a table per
    collective with its minimal cases as numbered notes, then ``notes`` and the capability matrix."""
    parts = [f"{fold_text(INTRO)}\n\n    {NEXT_COMMAND}"]
    number = 0
    column, verdict = header.index("minimal counterexample"), header.index("verdict")
    for title, table in sections:
        rows, cases = [], []
        for row in table:
            row = list(row)
            if row[column]:
                number += 1
                race = row[verdict].removeprefix("intermittent (torch race: ").removesuffix(")")
                if race != row[verdict]:  # the finding's path goes to the note: no column is that wide
                    row[verdict], row[column] = f"intermittent (torch race [{number}])", f"{row[column]}; {race}"
                cases.append(fold_text(f"[{number}] {row[0]}: {row[column]}", indent="    "))
                row[column] = f"[{number}]"
            rows.append(row)
        text_header = [TEXT_HEADER.get(name, name) for name in header]
        parts.append(heading_text(fold_text(title)) + folded_table(text_header, rows, fixed=(0,))
                     + ("\n\n" + "\n".join(cases) if cases else ""))
    parts += [fold_block(note) for note in notes]
    parts.append(caps)
    return "\n\n".join(parts)


def fold_text(text: str, *, width: int = WIDTH, indent: str = "") -> str:
    """``text`` folded at spaces into lines of at most ``width`` (continuations indented): never cut."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False)) if text else ""


def fold_block(block: str) -> str:
    """A note block (a heading line, then ``- item`` lines) with every line folded to :data:`WIDTH`."""
    return "\n".join(fold_text(line, indent="  " if line.startswith("- ") else "") for line in block.splitlines())


def folded_table(header: list[str], rows: list[list[str]], *, width: int = WIDTH, fixed: tuple[int, ...] = ()) -> str:
    """A fixed-width table within ``width`` columns, its cells folded at spaces, never cut.

    While too wide, the column narrowed by one is the one that adds the fewest lines to the
    table (the widest of those), never below its longest word; ``fixed`` columns are never narrowed.
    """
    columns = list(zip(header, *rows))
    widths = [max(len(cell) for cell in column) for column in columns]
    least = [widths[i] if i in fixed else max(len(word) for cell in column for word in cell.split() or [""])
             for i, column in enumerate(columns)]

    def height(column: int, w: int) -> list[int]:
        return [len(_fold(cell, w)) for cell in columns[column]]

    heights = [height(i, w) for i, w in enumerate(widths)]

    def lines(trial: list[list[int]]) -> int:
        return sum(max(row) for row in zip(*trial))

    while sum(widths) + 2 * (len(widths) - 1) > width:
        foldable = [i for i in range(len(widths)) if widths[i] > least[i]]
        if not foldable:
            break
        trials = {i: height(i, widths[i] - 1) for i in foldable}
        best = min(foldable, key=lambda i: (lines([trials[j] if j == i else h for j, h in enumerate(heights)]),
                                            -widths[i], i))
        widths[best] -= 1
        heights[best] = trials[best]
    out = []
    for row in [header, ["-" * w for w in widths], *rows]:
        cells = [_fold(cell, w) for cell, w in zip(row, widths)]
        for k in range(max(len(cell) for cell in cells)):
            out.append("  ".join((cell[k] if k < len(cell) else "").ljust(w) for cell, w in zip(cells, widths)).rstrip())
    return "\n".join(out)


def _fold(cell: str, width: int) -> list[str]:
    return textwrap.wrap(cell, width, break_long_words=False, break_on_hyphens=False) or [""]


def collective_sections(rows: list[Row], header: list[str]) -> list[tuple[str, list[list[str]]]]:
    """The table cut into one section per collective, in :data:`COLLECTIVES` order; a gather's
    section has no title, so a report of gathers reads as it always has."""
    sections = []
    for name, collective in COLLECTIVES.items():
        table = [[row.cells()[column] for column in header] for row in rows if row.spec.contract.collective == name]
        if table:
            sections.append(("" if name == "gather" else f"{name}: rank r gets {collective.means}", table))
    return sections


def heading_markdown(title: str) -> str:
    return f"#### {title}\n\n" if title else ""


def heading_text(title: str) -> str:
    return f"{title}\n\n" if title else ""


def intermittent_lines(rows: list[Row]) -> list[str]:
    """The findings kept out of the table because they did not fail on every replay, and the
    hangs and crashes no replay reproduced (not the variants', as far as anything shows)."""
    lines = [f"- {row.spec.name}: {finding.property}: {finding.notes()[0] if finding.notes() else finding.status}; "
             f"case {finding.case.describe()}; {finding.message.splitlines()[2].strip()[:160]}"
             for row in rows for finding in row.intermittent()]
    unattributed = [f"- {row.spec.name}: {line}" for row in rows if row.report for line in row.report.warnings()]
    notes = []
    if lines:
        notes.append("intermittent findings (failed in some replays only, so not in the table):\n" + "\n".join(lines))
    if unattributed:
        notes.append("not counted (a hang or crash that no replay reproduced):\n" + "\n".join(unattributed))
    return notes


def not_checked_lines() -> str:
    """The gather paths the catalogue leaves out, each with its reason."""
    return "not checked:\n" + "\n".join(f"- {name}: {reason}" for name, reason in NOT_CHECKED)


def merged_coverage(rows: list[Row]) -> Coverage:
    """Every variant's coverage added up: what the whole report tested."""
    reports = [row.report for row in rows if row.report is not None]
    merged = reports[0].coverage if reports else Coverage()
    for report in reports[1:]:
        merged = merged.merge(report.coverage)
    return merged


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


def check_variant(spec: VariantSpec, pool: Pool, label: str, *, max_examples: int, probe_misuse: bool,
                  timeout: float, quiet: bool, live: bool = True) -> Row:
    """One variant's search; an error that stops it becomes the row's ``error``, not the end of the report.

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
        options = api.CheckOptions(spec.target, contract, max_examples=max_examples, timeout=timeout,
                                   probe_misuse=probe_misuse, seed=variant_seed(spec.name), profile=REPORT_PROFILE,
                                   annotate=False, track_semantics=True, shrink_fault_steps=SHRINK_FAULT_STEPS,
                                   max_shrink_steps=MAX_SHRINK_STEPS, ahead=REPORT_AHEAD)
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


def short_contract(contract: Contract) -> str:
    """E.g. ``ragged dim 0, grad sum``: the claim without the dtype list (all gloo dtypes here);
    a reduce-scatter's reduction first (``max, ragged dim any, grad none``), a re-layout's two
    dims (``equal dims 2 -> 0 (4-d), grad adjoint``)."""
    op = f"{contract.op}, " if contract.kind.reduces else ""
    dims = f"dim {contract.dims}"
    if contract.relayout:  # e.g. ``dims 2 -> 0 (4-d)``: scattered, then gathered
        low, high = contract.ndim_range or (0, 0)
        dims = f"dims {contract.scatter_dim or 'any'} -> {contract.gather_dim or 'any'}"
        dims += "" if contract.ndims is None else f" ({low}-d)" if low == high else f" ({low}-{high}-d)"
    return f"{op}{'ragged' if contract.ragged else 'equal'} {dims}, grad {contract.grad}"


def misuse_cell(report: CheckReport) -> str:
    """How the variant behaves out of contract: ``raises`` (right), the failure kinds, or not probed."""
    if report.misuse_findings:
        return ", ".join(sorted({f.kind for f in report.misuse_findings}))
    return "raises" if report.misuse_examples else NOT_PROBED


def capability_cells(caps: capabilities.Capabilities) -> dict[str, object]:
    """The capability matrix as ``{dtype: {op: "ok" or reason}}`` for JSON."""
    table: dict[str, dict[str, str]] = {}
    for (dtype, op), cell in caps.cells.items():
        table.setdefault(dtype, {})[op] = cell
    return {"backend": caps.backend, "device": caps.device, "cells": table}
