"""The command line: ``python -m harness check TARGET ...`` and ``python -m harness report``.

``check`` is a stable interface: option names, defaults, exit statuses and JSON keys may be
added to, never changed.  Exit status (:class:`harness.core.errors.Exit`):

- 0: no counterexample;
- 1: a counterexample (wrong values or gradients, a hang, a crash, a misuse failure);
- 2: the target could not be loaded or the arguments are wrong: one line on stderr, nothing
  else (argparse's usage dump is replaced, tracebacks are never shown);
- 3 (added): the harness itself could not run (the rank pool did not start twice, its
  capability measurement failed twice, or its own code failed): one ``harness error:`` line saying
  what failed and what to try;
- 130 (added): interrupted.

The CLI process never imports the target: a rank imports it
(:func:`harness.ranks.rank_calls.plan_call_on_rank`).
Argument mistakes and a target path that is not there (or does not parse) are told before
torch is imported.  ``fuzz`` lives in :mod:`harness.frontends.fuzz`, ``replay`` in :mod:`harness.frontends.replay`; ``--listen`` (ranks
started by torchrun) in :mod:`harness.pool.remote_driver`; ``explain-case`` prints the case notation
(:mod:`harness.report.notation`).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.core.contract import parse_dtypes
from harness.core.errors import Exit, TargetError, UsageError, exit_status
from harness.frontends.arguments import (
    PROG,
    UsageParser,
    add_check_arguments,
    add_fuzz_commands,
    add_listen_arguments,
    add_report_arguments,
    one_line,
)
from harness.pool import forkserver
from harness.ranks import targets
from harness.report import notation
from harness.settings import files, profile_names
from harness.settings.options import contract_of, resolved

if TYPE_CHECKING:
    from harness.frontends.api import CheckOptions, Prepared

#: The commands that start rank processes: the forkserver starts as soon as their arguments
#: are known to be good, so that its imports overlap the command's own.
RANK_COMMANDS = frozenset({"check", "fuzz", "report", "replay"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (see the module docstring).

    The arguments and the target's path are checked before torch is imported: a typo costs
    milliseconds, not the seconds torch and the rank forkserver take to start.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # Hypothesis keeps caches in ``.hypothesis/`` of the working directory: ours go with the
    # rest of what the harness writes (a user's own setting wins).
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(files.output_dir()))
    try:
        args = build_parser().parse_args(argv)
        check_before_starting(args)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (UsageError, TargetError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return Exit.USAGE
    try:
        if args.command in RANK_COMMANDS and not getattr(args, "listen", None):
            forkserver.start(compiling=bool(getattr(args, "compile", False)))
        return _run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except Exception as exc:  # a bug of the harness: exit 3 with one line, never 1, never a bare traceback
        print(f"harness error: {internal_error(exc)}", file=sys.stderr)
        return Exit.HARNESS


def internal_error(exc: Exception) -> str:
    """One line for a failure of the harness's own code; its traceback goes to a file it names."""
    path = files.default_path("internal-error.txt")
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    try:
        files.write_atomically(path, "".join(traceback.format_exception(exc)))
        saved = f"the traceback is in {path}"
    except OSError:
        saved = "its traceback could not be saved"
    at = f" at {os.path.basename(where.filename)}:{where.lineno}" if where else ""
    return (f"internal error {type(exc).__name__}: {one_line(exc)}{at}; {saved}; nothing was decided about the "
            f"target: run the command again, and if it fails the same way, report it with that file")


def check_before_starting(args: argparse.Namespace) -> None:
    """What can be told wrong without torch: the dtype list, the world-size range, fixed arguments, flags that
    contradict each other (the contract of a ``check``, or of a ``fuzz`` of one TARGET), the target's path.

    The target is looked for on this machine unless ranks elsewhere import it (``--listen``).
    """
    settings = resolved(vars(args))
    if settings["dtypes"]:
        parse_dtypes(settings["dtypes"])
    if args.command == "check" or (args.command == "fuzz" and args.target):  # a contradiction: refused before torch
        profile = settings["profile"] or profile_names.default_name()
        contract_of(settings, settings["world_sizes"] or profile_names.WORLD_SIZES[profile])
    if getattr(args, "target", None) and not getattr(args, "listen", None):
        targets.locate(args.target)


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except BaseException as exc:
        status = exit_status(exc)
        if status is None:
            raise
        print(f"{'error' if status == Exit.USAGE else 'harness error'}: {one_line(exc)}", file=sys.stderr)
        return status


def build_parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog=PROG, description="Property-based correctness checks for distributed all_gather.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check,report,fuzz,replay,explain-case}")
    check = commands.add_parser(
        "check",
        help="search for a counterexample to a gather meeting its contract",
        description="Search for a counterexample to TARGET meeting its contract, on real gloo/nccl process "
                    "groups. Exit status: 0 none found, 1 counterexample, 2 bad target or arguments.",
    )
    add_check_arguments(check)
    add_listen_arguments(check, "check")
    check.set_defaults(run=run_check_command)
    catalogue = commands.add_parser(
        "report",
        help="check every catalogue variant and print the verdict table",
        description="Check every variant of the catalogue against its authors' claim and print the verdict "
                    "table and the backend's capability matrix.",
    )
    add_report_arguments(catalogue)
    catalogue.set_defaults(run=run_report_command)
    add_fuzz_commands(commands)
    explain = commands.add_parser("explain-case", help="how to read a case line (W=2 ... | r0 (3,) iota ...)",
                                  description="Explain the notation of the case lines findings print.")
    explain.set_defaults(run=run_explain_command)
    return parser


def run_explain_command(args: argparse.Namespace) -> int:
    """``explain-case``: the case notation (:mod:`harness.report.notation`)."""
    print(notation.TEXT, end="")
    return 0


def run_report_command(args: argparse.Namespace) -> int:
    """``report``: see :mod:`harness.frontends.catalogue_report`."""
    from harness.frontends import catalogue_report

    files.check_writable("--json", args.json)
    files.check_writable("--html", args.html)
    return catalogue_report.run(vars(args), markdown=args.markdown)


def run_check_command(args: argparse.Namespace) -> int:
    """``check``: validate everything, search, print the verdict; 0 pass, 1 counterexample."""
    from harness.frontends.api import bind, check_command, execute, prepare, remote_pool
    from harness.pool.pool import shared_pool
    from harness.report import coverage_page
    from harness.report.text import (
        CASE_NOTATION,
        ProgressLine,
        check_json,
        check_markdown,
        check_verdict_text,
        finding_dicts,
        page_header,
        write_step_summary,
    )

    seed = random.randrange(1_000_000) if args.seed is None else args.seed
    options = bind({**vars(args), "seed": seed}, args.target, listen=bool(args.listen))
    files.check_writable("--json", args.json)
    files.check_writable("--html", args.html)
    pool = (remote_pool(args.listen, options.contract, timeout=args.timeout, connect_timeout=args.connect_timeout,
                        address_file=args.address_file) if args.listen else shared_pool())
    prepared = prepare(options, pool)
    if not args.quiet:
        print(_header(options, prepared), flush=True)
    progress = None if args.quiet else ProgressLine(label="  ")
    try:
        result = execute(options, pool, prepared, on_example=progress)
    finally:
        if progress is not None:
            progress.close()
    rerun = check_command(options, listen=args.listen, connect_timeout=args.connect_timeout)
    told = [*prepared.probe.notes, *prepared.probe.advice]
    verdict = check_verdict_text(result, full_stacks=options.full_stacks, probe_misuse=options.probe_misuse, told=told)
    print(("" if args.quiet else "\n") + verdict + f"\n\nrerun: {rerun}"
          + ("" if result.verdict == "pass" else f"\n{CASE_NOTATION}"))
    if not args.quiet:
        print("\n" + result.coverage.summary())
    if args.json:
        files.write_json(args.json, check_json(result, seed=seed, not_drawn=list(prepared.not_drawn), command=rerun))
    if args.html:
        coverage_page.write(args.html, result.coverage, page_header(result, seed=seed), finding_dicts(result))
        print(f"coverage page: {os.path.abspath(args.html)}")
    write_step_summary(check_markdown(result))
    return Exit.PASS if result.verdict == "pass" else Exit.COUNTEREXAMPLE


def _header(options: CheckOptions, prepared: Prepared) -> str:
    from harness.frontends.api import profile_settings

    contract, not_drawn = prepared.probe.contract, prepared.not_drawn
    low, high = contract.world_sizes
    if options.duration_s is not None:
        budget = f"time budget {options.duration_s:g} s"
    else:
        budget = f"{options.max_examples or profile_settings(options.profile).max_examples} examples"
    lines = [
        f"gather-harness check {options.target}",
        f"  contract: {contract.describe()}",
        f"  {contract.backend}/{contract.device}, world sizes {low}-{high}, "
        f"profile {options.profile or profile_names.default_name()} "
        f"({budget}), seed {options.seed}, timeout {options.timeout:g} s per case",
        f"  called as {prepared.probe.convention.describe()}",
    ]
    lines += [f"  note: {note}" for note in [*prepared.probe.notes, *prepared.probe.advice]]
    if not_drawn:
        lines.append(f"  not drawn: {', '.join(not_drawn)} ({prepared.not_drawn_why})")
    return "\n".join(lines)
