"""How results leave the process: the live progress line, JSON files, tables, Markdown summaries.

Kept apart from the commands so that ``check`` and ``report`` print the same way, and so
that the JSON written for scripts is built in one place (its keys are a stable interface; more may be
added, none changed).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import torch

from harness.core.case import Case
from harness.core.contract import COLLECTIVES
from harness.core.conventions import Call
from harness.ranks.targets import shown_path, shown_target
from harness.report.stacks import user_frames
from harness.search.finding import Finding
from harness.search.results import CheckReport, Progress

#: Off a terminal (CI logs) a progress line is printed at most this often.
PLAIN_INTERVAL_S = 5.0
#: On a terminal the ``\r`` line is redrawn at most this often.
TTY_INTERVAL_S = 0.1


class ProgressLine:
    """The live progress line: examples done, examples/s, the current case's W and dtype, failures.

    On a terminal it is one line redrawn in place with ``\\r``; elsewhere (CI logs, pipes) a
    plain line every :data:`PLAIN_INTERVAL_S` seconds, so logs stay short but show life.
    Call it with a :class:`~harness.search.results.Progress` after each example; :meth:`close` ends it.
    """

    def __init__(self, stream: TextIO | None = None, *, label: str = "", tty: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.tty = self.stream.isatty() if tty is None else tty
        self.interval_s = TTY_INTERVAL_S if self.tty else PLAIN_INTERVAL_S
        self.last_shown = time.monotonic()
        self.width = 0

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        if now - self.last_shown < self.interval_s:
            return
        self.last_shown = now
        text = self.label + describe_progress(progress)
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Erase the ``\\r`` line so that what follows starts on a clean line."""
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
        self.width = 0


def describe_progress(progress: Progress) -> str:
    """E.g. ``42 examples, 9.8/s, now W=3 float64``, or once something failed
    ``3 examples + 41 shrinking steps, 9.8/s, now W=2 float32, 1 property failing``."""
    text = f"{count(progress.searched, 'example')}"
    if progress.shrink_steps:
        text += f" + {count(progress.shrink_steps, 'shrinking step')}"
    text += f", {progress.rate:.1f}/s"
    if progress.current is not None:
        text += f", now W={progress.current.world_size} {progress.current.dtype}"
    if progress.failures:
        text += f", {progress.failures} propert{'y' if progress.failures == 1 else 'ies'} failing"
    return text


def count(n: int, noun: str) -> str:
    """``1 example``, ``3 examples``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def examples_text(report: CheckReport) -> str:
    """What a search ran, adding up: ``50 examples``, or ``3 examples + 141 shrinking steps``."""
    text = count(report.examples, "example")
    return text + (f" + {count(report.shrink_steps, 'shrinking step')}" if report.shrink_steps else "")


def check_json(report: CheckReport, **extra: object) -> dict:
    """The ``--json`` document of ``check``: its stable keys, then ``extra`` ones."""
    return {**report.to_json(), **extra}


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width table for terminals and logs; cells are single lines."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
             for row in [header, ["-" * width for width in widths], *rows]]
    return "\n".join(lines)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; ``|`` inside cells is escaped."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([line(header), line(["---"] * len(header)), *(line(row) for row in rows)])


def check_markdown(report: CheckReport) -> str:
    """The Markdown summary of one ``check``: the verdict, then each finding and its repro."""
    verdict = "✅ pass" if report.verdict == "pass" else "❌ fail"
    lines = [
        f"### gather-harness check `{report.target}`: {verdict}",
        "",
        f"Contract: {report.contract.describe()} · {examples_text(report)} · {report.elapsed_s:.1f} s",
    ]
    findings = report.findings + report.misuse_findings
    if findings:
        rows = [[f.property, f.kind, f"`{f.case.describe()}`", f"`{f.repro}`"] for f in findings]
        lines += ["", markdown_table(["property", "kind", "minimal case", "repro"], rows)]
        for finding in findings:
            lines += ["", f"<details><summary>{finding.property}</summary>", "", "```text", finding_message(finding), "```",
                      "", "</details>"]
    return "\n".join(lines) + "\n"


def page_header(report: CheckReport, **extra: object) -> dict[str, str]:
    """The coverage page's header for one check: what ran, against what, where, how long."""
    contract = report.contract
    header = {
        "status": "finished",
        "target": report.target,
        "contract": contract.describe(),
        "called as": report.convention.describe() if report.convention else "",
        "backend/device": f"{contract.backend}/{contract.device}",
        "world sizes": f"{contract.world_sizes[0]}-{contract.world_sizes[1]}",
        "torch": torch.__version__,
        "seed": str(report.seed),
        "examples": examples_text(report),
        "duration": f"{report.elapsed_s:.1f} s",
        "verdict": report.verdict,
    }
    return {**header, **{key: str(value) for key, value in extra.items()}}


def finding_dicts(report: CheckReport) -> list[dict]:
    """Every finding of ``report`` as the page and the JSON show it."""
    return [finding.to_json() for finding in report.findings + report.misuse_findings]


def write_step_summary(markdown: str) -> None:
    """Append ``markdown`` to ``$GITHUB_STEP_SUMMARY`` when set: the job page then shows it."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")


def failure_verdict(report: CheckReport) -> str:
    """A failed check in one line: the properties violated, the first finding's kind, world size,
    dtype and dim, and the target (pytest's short summary shows it)."""
    findings = report.findings + report.misuse_findings
    case = findings[0].case
    names = ", ".join(dict.fromkeys(finding.property for finding in findings))
    collective = "" if case.collective == "gather" else f"{case.collective} "
    dim = "" if COLLECTIVES[case.collective].dimless else f" dim={case.dim}"
    return (f"{names} ({findings[0].kind}) at {collective}W={case.world_size} {case.dtype}{dim} "
            f"in {shown_target(report.target)}")


def failure_text(report: CheckReport, *, full_stacks: bool, rerun: Sequence[str],
                 how_to_show: str = "full_stacks=True (pytest: --gather-full-stacks)") -> str:
    """The text of a failed check's ``AssertionError``: the verdict on its first line, what was
    checked, every finding, the seed and the commands that rerun it."""
    findings = report.findings + report.misuse_findings
    lines = [f"gather check failed: {failure_verdict(report)}",
             f"checked {shown_target(report.target)}: {report.contract.describe()}; {examples_text(report)}, "
             f"seed {report.seed or 0}"]
    lines += [f"note: {note}" for note in report.notes]
    lines += ["", *(finding_text(f, full_stacks=full_stacks, how_to_show=how_to_show) + "\n" for f in findings)]
    lines += [f"{'rerun' if k == 0 else '   or'}: {command}" for k, command in enumerate(rerun)]
    lines.append(CASE_NOTATION)
    return "\n".join(lines)


def failure_summary(report: CheckReport, *, full_stacks: bool, rerun: str,
                    how_to_show: str = "--gather-full-stacks") -> list[str]:
    """A failed check as a test report tells it (:func:`~harness.core.errors.check_failed`): the
    verdict, then per finding what each rank got and the repro to run, the notes that ask
    something, and ``rerun``, the command that runs the check outside pytest: :func:`failure_text`
    less what the verdict, the test's id and its source say (the first property, the contract,
    how the target was called, the pytest command), the second repro and which example found it
    first."""
    findings = report.findings + report.misuse_findings
    lines = [failure_verdict(report)]
    for finding in findings:
        message = finding.message if full_stacks else user_frames(finding.message, how_to_show)
        told = {f"property violated: {finding.property} ({finding.kind})" if finding is findings[0] else "",
                f"found first by {finding.found_by}"}
        lines += [line for line in [*message.splitlines(), *finding.notes()] if line not in told]
        script = finding.minimal_repro or finding.repro
        if script:
            what = "minimal repro (plain torch, prints expected vs actual)" if finding.minimal_repro else "repro"
            lines.append(f"{what}: python {shlex.quote(shown_path(script))}")
    lines += [f"note: {note}" for note in report.notes if note not in report.call_notes]
    return [*lines, f"rerun: {rerun}"]


def fold(line: str, width: int) -> list[str]:
    """``line`` folded at spaces to ``width`` columns, each continuation indented 4 more than the
    line: never inside a word, so a path (or a ``shlex``-quoted one) that does not fit is a line of
    its own, whole, and can be copied out of a log."""
    if len(line) <= width:
        return [line]
    text = line.lstrip(" ")
    lead = line[:len(line) - len(text)]
    lines = [lead]
    for word in re.findall(r"'[^']*'\S*|\S+", text):
        if lines[-1].strip() and len(lines[-1]) + 1 + len(word) > width:
            lines.append(lead + "    ")
        lines[-1] += (" " if lines[-1].strip() else "") + word
    return lines


#: Where a failure's reader learns to read its case line.
CASE_NOTATION = "how to read a case line: python -m harness explain-case"


def finding_text(finding: Finding, *, full_stacks: bool = False, how_to_show: str = "--full-stacks") -> str:
    """The property, the minimal case, what each rank got versus the reference, and both repros."""
    script = shlex.quote(finding.repro) if finding.repro else finding.repro  # a path with spaces: one argument
    run = f"python {script}   or: torchrun --standalone --nproc-per-node {finding.case.world_size} {script}"
    lines = [finding_message(finding, full_stacks=full_stacks, how_to_show=how_to_show),
             f"called as: {finding.call.describe(finding.case.passes_group)}", f"repro: {finding.repro}", f"  run: {run}"]
    if finding.minimal_repro:
        lines.append(f"minimal repro (plain torch, prints expected vs actual): python {shlex.quote(finding.minimal_repro)}")
    return "\n".join(lines)


def finding_message(finding: Finding, *, full_stacks: bool = False, how_to_show: str = "--full-stacks") -> str:
    """The counterexample as printed: the violations, then the notes.

    Ranks' stacks show the user's frames only, unless ``full_stacks``; ``how_to_show``
    names the option that shows them all, in the front end's own words.
    """
    message = finding.message if full_stacks else user_frames(finding.message, how_to_show)
    return "\n".join([message, *finding.notes()])


# -- the commands' verdicts ----------------------------------------------------------------------


def check_verdict_text(result: CheckReport, *, full_stacks: bool, probe_misuse: bool,
                       told: Sequence[str] = ()) -> str:
    """``check``'s verdict: PASS/FAIL with counts, the notes not ``told`` already (in the header),
    then every finding with its repros, misuse findings apart."""
    counts = f"{examples_text(result)} ({result.elapsed_s:.1f} s)"
    if result.verdict == "pass":
        lines = [f"PASS: no counterexample in {counts}"]
    else:
        names = [f.property for f in result.findings + result.misuse_findings]
        lines = [f"FAIL: {len(names)} propert{'y' if len(names) == 1 else 'ies'} violated ({', '.join(names)}) "
                 f"in {counts}"]
    lines += [f"note: {note}" for note in result.notes if note not in told]
    lines += [f"leak: {leak}" for leak in result.leaks]
    lines += [f"warning: {warning}" for warning in result.warnings()]
    lines += ["\n" + finding_text(finding, full_stacks=full_stacks) for finding in result.findings]
    if probe_misuse:
        lines.append(_misuse_summary(result))
        lines += ["\n" + finding_text(finding, full_stacks=full_stacks) for finding in result.misuse_findings]
    return "\n".join(lines)


def _misuse_summary(result: CheckReport) -> str:
    if not result.misuse_examples:
        return "misuse cases: none; the contract leaves no out-of-contract input to try"
    if not result.misuse_findings:
        return (f"misuse cases: {result.misuse_examples} examples, each raised in time on every "
                f"rank or answered right")
    return f"\nmisuse cases (--probe-misuse), {result.misuse_examples} examples:"


def fuzz_header(settings: Mapping[str, Any], names: Sequence[str], max_examples: int | None, summary_path: str,
                every_s: float) -> str:
    """``fuzz``'s header from its summary's ``settings``: what runs, where, for how long, and where
    the summary is rewritten."""
    budget = (f"{settings['duration_s']:g} s" if settings["duration_s"] is not None else "no time limit") + (
        f", at most {max_examples} examples" if max_examples else "")
    low, high = settings["world_sizes"]
    return "\n".join([
        f"gather-harness fuzz: {len(names)} target(s): {', '.join(names)}",
        f"  {settings['backend']}/{settings['device']}, world sizes {low}-{high}, profile {settings['profile']}, "
        f"database {settings['database']}, budget {budget}, seed {settings['seed']}",
        f"  summary: {summary_path} (rewritten every {every_s:g} s)",
    ])


def fuzz_verdict_text(document: Mapping[str, Any], summary_path: str, *, full_stacks: bool) -> str:
    """``fuzz``'s verdict, read off its JSON summary (``document``): what was found, each target's
    tally, every finding with the command that replays it."""
    state = {"finished": "", "interrupted": " (interrupted)", "error": " (stopped by an error)"}[document["status"]]
    findings = document["findings"]
    head = (f"FOUND {len(findings)} finding(s)" if findings else "NOTHING FOUND") + (
        f" in {document['examples']} examples ({document['elapsed_s']:.0f} s){state}")
    lines = [head] + [f"  {entry['name']}: {entry['status']}, {entry['examples']} examples"
                      + (f" ({entry['error']})" if entry["error"] else "") for entry in document["targets"]]
    for finding in findings:
        shown = Finding(finding["property"], finding["kind"], Case.from_dict(finding["case"]), finding["message"], [],
                        finding["repro"], minimal_repro=finding.get("minimal_repro"),
                        call=Call.from_dict(finding["call"]))  # the call check prints, not a default f(x, dim)
        lines += ["", f"[{finding['index']}] {finding['name']}", finding_text(shown, full_stacks=full_stacks),
                  f"replay: {finding['replay']}"]
    lines += [f"warning: {line}" for line in document["warnings"]]
    lines.append(f"\nsummary: {summary_path}")
    return "\n".join(lines)
