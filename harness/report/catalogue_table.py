"""The catalogue report's table, as a person reads it: one row per variant, folded to fit.

A row's cells come from its report alone, the same on every run (each variant's seed is fixed:
:func:`variant_seed`); the text fits :data:`WIDTH` columns, cells folded at spaces, never cut, the
minimal cases as numbered notes under each collective's table.
"""

from __future__ import annotations

import functools
import textwrap
import zlib
from dataclasses import dataclass

from harness.core.contract import COLLECTIVES, Contract
from harness.pool import capabilities
from harness.search.coverage import Coverage
from harness.search.finding import Finding
from harness.search.results import CheckReport
from harness.variants import NOT_CHECKED, VariantSpec

NOT_PROBED = "not probed"



HEADER = ("variant", "claimed", "verdict", "failing", "minimal counterexample", "de facto grad", "misuse")



#: The text table's header: the minimal case is a numbered note under the table.
TEXT_HEADER = {"minimal counterexample": "minimal case"}



#: The text output fits this many columns: long cells are folded at spaces, minimal cases moved to notes.
WIDTH = 120



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



INTRO = ("Each catalogue variant (a published collective: all_gather, reduce-scatter, all-to-all, all-reduce, split, copy, broadcast, "
         "scatter, reduce or gather to one rank) checked on real "
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



@functools.lru_cache(maxsize=1 << 14)
def _fold(cell: str, width: int) -> tuple[str, ...]:
    """``cell`` folded at spaces to ``width``; kept, since :func:`folded_table` tries every column
    one narrower on each step, and all but one of them again on the next."""
    return tuple(textwrap.wrap(cell, width, break_long_words=False, break_on_hyphens=False)) or ("",)



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



def short_contract(contract: Contract) -> str:
    """E.g. ``ragged dim 0, grad sum``: the claim without the dtype list (all gloo dtypes here);
    a reduction first (``max, ragged dim any, grad none``; an all-reduce's ``sum, grad identity``), a re-layout's two
    dims (``equal dims 2 -> 0 (4-d), grad adjoint``)."""
    op = f"{contract.op}, " if contract.kind.reduces else ""
    if contract.kind.root_name:  # ``src 0 (group rank), ``
        op += f"{contract.kind.root_name} {contract.root}"
        op += f"{' (group rank)' if contract.src_rank == 'group' else ''}, "
    if contract.kind.dimless:  # an all-reduce, a copy, a broadcast, a reduce: one shape, no dim
        return f"{op}grad {contract.grad}"
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
