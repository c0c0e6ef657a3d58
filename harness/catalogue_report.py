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
example database, and only findings that fail on every replay enter it, so the same versions
print the same table on every run.

A variant whose torch path the installed release lacks (``VariantSpec.needs``, e.g. the public
DTensor module before torch 2.5) is not run: its row says ``unavailable: needs torch >= X.Y``
(JSON verdict ``unavailable``), and the other rows are unaffected.

The report is informational (the expected verdicts are asserted by the project's tests):
exit status 0 when every available variant's verdict was obtained, 3 when some variant could
not be checked at all (verdict ``error``: the harness's failure, not a finding), 2 on bad arguments.

Budget, measured on a 2-core CPU machine (torch 2.13, dev profile, empty example database):
:data:`DEFAULT_MAX_EXAMPLES` = 60 examples per variant takes about 1 minute for the whole
catalogue, leaving room under the 5-minute limit for shrinking and a busy machine.  Misuse
probes are off by default: equal-only variants given ragged input hang by design, every
hanging example costs the full timeout, and shrinking one such counterexample took Hypothesis
up to its own 5-minute cap per variant (``plain_all_gather``: 305 s).
"""

from __future__ import annotations

import dataclasses
import sys
import time
import zlib
from dataclasses import dataclass

import torch

from harness import api, capabilities, coverage_page
from harness.contract import COLLECTIVES, Contract
from harness.coverage import Coverage
from harness.errors import Exit, UsageError
from harness.files import write_json
from harness.finding import Finding
from harness.machine import within_gpus
from harness.options import REPORT_MAX_EXAMPLES, REPORT_TIMEOUT_S
from harness.output import ProgressLine, markdown_table, text_table, write_step_summary
from harness.pool import RankSets, shared_pool
from harness.search import CheckReport
from harness.variants import CATALOGUE, NOT_CHECKED, VariantSpec, by_name

DEFAULT_MAX_EXAMPLES = REPORT_MAX_EXAMPLES
DEFAULT_TIMEOUT_S = REPORT_TIMEOUT_S
#: Seconds of faulty shrinking steps per failing property (the engine's default is 30): a
#: one-line counterexample per variant needs less, and the whole catalogue must stay quick.
SHRINK_BUDGET_S = 20.0
NOT_PROBED = "not probed"
#: The ``ci`` profile: no example database, whose contents would vary the table between runs.
REPORT_PROFILE = "ci"
HEADER = ("variant", "claimed", "verdict", "failing", "minimal counterexample", "de facto grad", "misuse")


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
            values = [name, claimed, "fail" if findings else "pass", failing, minimal,
                      report.de_facto_semantics(), misuse_cell(report)]
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


def run(*, variants: str | None = None, max_examples: int = DEFAULT_MAX_EXAMPLES, probe_misuse: bool = False,
        timeout: float = DEFAULT_TIMEOUT_S, markdown: bool = False, json_path: str | None = None,
        html_path: str | None = None, quiet: bool = False, backend: str = "gloo", device: str = "cpu",
        world_sizes: tuple[int, int] | None = None) -> int:
    """Check the selected variants, print the table and the capability matrix; 0 if all were checked, 3 if
    the harness could not check one (its row says why: that is no verdict on the variant).

    ``variants`` is a comma list of catalogue names (``None``: all); each is checked on
    ``backend``/``device`` at ``world_sizes`` (``None``: its own, within the GPUs for nccl); the
    rest are the command's options (see ``python -m harness report --help``).  Each variant runs with its
    own fixed seed and no example database, so the same versions print the same table.
    """
    specs = [on_machine(spec, backend, device, world_sizes) for spec in select(variants)]
    pool = shared_pool()
    started = time.monotonic()
    rows = [check_variant(spec, pool, f"[{i}/{len(specs)}] {spec.name}: ", max_examples=max_examples,
                          probe_misuse=probe_misuse, timeout=timeout, quiet=quiet)
            for i, spec in enumerate(specs, 1)]
    elapsed = time.monotonic() - started
    caps = capabilities.measure(pool, backend, device)
    header = [column for column in HEADER if probe_misuse or column != "misuse"]
    sections = collective_sections(rows, header)
    notes = intermittent_lines(rows) + [not_checked_lines()]
    as_markdown = "\n\n".join([*(heading_markdown(title) + markdown_table(header, table) for title, table in sections),
                                *notes, f"```text\n{caps.table()}\n```"])
    print(as_markdown if markdown else "\n\n".join([*(heading_text(title) + text_table(header, table)
                                                        for title, table in sections), *notes, caps.table()]))
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


def check_variant(spec: VariantSpec, pool: RankSets, label: str, *, max_examples: int, probe_misuse: bool,
                  timeout: float, quiet: bool) -> Row:
    """One variant's search; an error that stops it becomes the row's ``error``, not the end of the report.

    A variant the installed torch cannot run is not started: its row says why.
    """
    missing = spec.unavailable()
    if missing:
        row = Row(spec, None, unavailable=missing)
        if not quiet:
            print(label + row.summary(), file=sys.stderr)
        return row
    progress = None if quiet else ProgressLine(label=label)
    try:
        options = api.CheckOptions(spec.target, spec.contract, max_examples=max_examples, timeout=timeout,
                                   probe_misuse=probe_misuse, seed=variant_seed(spec.name), profile=REPORT_PROFILE,
                                   annotate=False, track_semantics=True, shrink_budget_s=SHRINK_BUDGET_S)
        report = api.execute(options, pool, api.prepare(options, pool), on_example=progress)
    except Exception as exc:  # one broken variant must not cost the other rows
        row = Row(spec, None, f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    else:
        row = Row(spec, report)
    if progress is not None:
        progress.close()
        print(label + row.summary(), file=sys.stderr)
    return row


def short_contract(contract: Contract) -> str:
    """E.g. ``ragged dim 0, grad sum``: the claim without the dtype list (all gloo dtypes here);
    a reduce-scatter's reduction first (``max, ragged dim any, grad none``)."""
    op = f"{contract.op}, " if contract.kind.reduces else ""
    return f"{op}{'ragged' if contract.ragged else 'equal'} dim {contract.dims}, grad {contract.grad}"


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
