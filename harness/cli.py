"""The command line: ``python -m harness check TARGET ...`` and ``python -m harness report``.

``check`` is a stable interface (BRIEF §6): option names, defaults, exit statuses and JSON
keys may be added to, never changed.  Exit status:

- 0: no counterexample;
- 1: a counterexample (wrong values or gradients, a hang, a crash, a misuse failure);
- 2: the target could not be loaded or the arguments are wrong: one line on stderr, nothing
  else (argparse's usage dump is replaced, tracebacks are never shown);
- 3 (added): the harness itself could not run (the rank pool did not start twice, its
  capability probe failed twice, or its own code failed): one ``harness error:`` line saying
  what failed and what to try;
- 130 (added): interrupted.

The CLI process never imports the target: a rank imports it (``harness.api.verify_target``).
``fuzz`` and ``replay`` live in :mod:`harness.fuzz`; ``--listen`` (ranks started by torchrun)
in :mod:`harness.remote`.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import traceback
from collections.abc import Sequence

from harness import catalogue_report, coverage_page, files, fuzz, profiles, remote
from harness.api import CheckOptions, Prepared, build_contract, execute, finding_text, prepare, profile_settings
from harness.arguments import (
    PROG,
    UsageParser,
    add_check_arguments,
    one_line,
    positive_float,
    positive_int,
    rerun_command,
)
from harness.contract import UsageError, parse_world_sizes
from harness.conventions import Misfit
from harness.output import ProgressLine, check_json, check_markdown, finding_dicts, page_header, write_step_summary
from harness.pool import PoolError, PoolGone, shared_pool
from harness.search import CheckReport
from harness.targets import TargetError


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Hypothesis keeps caches in ``.hypothesis/`` of the working directory: ours go with the
    # rest of what the harness writes (a user's own setting wins).
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(files.output_dir()))
    try:
        args = build_parser().parse_args(argv)
        return args.run(args, argv)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (UsageError, TargetError, Misfit) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except (PoolError, PoolGone) as exc:
        print(f"harness error: {one_line(exc)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug of the harness: exit 3 with one line, never 1, never a bare traceback
        print(f"harness error: {internal_error(exc)}", file=sys.stderr)
        return 3


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


def build_parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog=PROG, description="Property-based correctness checks for distributed all_gather.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check,report,fuzz,replay}")
    check = commands.add_parser(
        "check",
        help="search for a counterexample to a gather meeting its contract",
        description="Search for a counterexample to TARGET meeting its contract, on real gloo/nccl process "
                    "groups. Exit status: 0 none found, 1 counterexample, 2 bad target or arguments.",
    )
    add_check_arguments(check)
    remote.add_arguments(check)
    check.set_defaults(run=run_check_command)
    catalogue = commands.add_parser(
        "report",
        help="check every catalogue variant and print the verdict table",
        description="Check every variant of the catalogue against its authors' claim and print the verdict "
                    "table and the backend's capability matrix.",
    )
    _add_report_arguments(catalogue)
    catalogue.set_defaults(run=run_report_command)
    fuzz.register(commands)
    return parser


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables instead of plain text")
    parser.add_argument("--json", metavar="PATH", help="write every variant's report as JSON")
    parser.add_argument("--html", metavar="PATH", help="write the coverage page of the whole report")
    parser.add_argument("--max-examples", type=positive_int, default=catalogue_report.DEFAULT_MAX_EXAMPLES, metavar="N",
                        help=f"examples per variant (default: {catalogue_report.DEFAULT_MAX_EXAMPLES})")
    parser.add_argument("--variants", metavar="a,b", help="comma list of catalogue names (default: all)")
    parser.add_argument("--probe-misuse", action=argparse.BooleanOptionalAction, default=False,
                        help="also probe out-of-contract input; slow, as equal-only variants hang on ragged "
                             "input by design (default: --no-probe-misuse)")
    parser.add_argument("--timeout", type=positive_float, default=catalogue_report.DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"per case: a rank still running after this long is a hang "
                             f"(default: {catalogue_report.DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--quiet", action="store_true", help="no progress lines and no coverage summary")


def run_report_command(args: argparse.Namespace, argv: list[str]) -> int:
    """``report``: see :mod:`harness.catalogue_report`."""
    files.check_writable("--json", args.json)
    files.check_writable("--html", args.html)
    return catalogue_report.run(variants=args.variants, max_examples=args.max_examples, probe_misuse=args.probe_misuse,
                                timeout=args.timeout, markdown=args.markdown, json_path=args.json,
                                html_path=args.html, quiet=args.quiet)


def run_check_command(args: argparse.Namespace, argv: list[str]) -> int:
    """``check``: validate everything, search, print the verdict; 0 pass, 1 counterexample."""
    profile = args.profile or profiles.default_name()
    world_sizes = parse_world_sizes(args.world_sizes) if args.world_sizes else profiles.WORLD_SIZES[profile]
    contract = (remote.build_contract if args.listen else build_contract)(
        ragged=args.ragged, dims=args.dims, grad=args.grad, dtype_text=args.dtypes, backend=args.backend,
        device=args.device, world_sizes=world_sizes, output=args.output, groups=args.groups)
    files.check_writable("--json", args.json)
    files.check_writable("--html", args.html)
    seed = random.randrange(1_000_000) if args.seed is None else args.seed
    options = CheckOptions(target=args.target, contract=contract, dtype_text=args.dtypes,
                           max_examples=args.max_examples, duration_s=args.duration, seed=seed,
                           timeout=args.timeout, probe_misuse=args.probe_misuse, repro_dir=args.repro_dir,
                           profile=profile, bits=args.bits)
    pool = remote.pool_from_arguments(args, contract) if args.listen else shared_pool(args.timeout)
    prepared = prepare(options, pool)
    if not args.quiet:
        print(_header(options, prepared), flush=True)
    progress = None if args.quiet else ProgressLine(label="  ")
    try:
        result = execute(options, pool, prepared, on_example=progress)
    finally:
        if progress is not None:
            progress.close()
    rerun = rerun_command(argv, seed)
    print(("" if args.quiet else "\n") + _verdict_text(result, options) + f"\n\nrerun: {rerun}")
    if not args.quiet:
        print("\n" + result.coverage.summary())
    if args.json:
        files.write_json(args.json, check_json(result, seed=seed, not_drawn=list(prepared.not_drawn), command=rerun))
    if args.html:
        coverage_page.write(args.html, result.coverage, page_header(result, seed=seed), finding_dicts(result))
        print(f"coverage page: {os.path.abspath(args.html)}")
    write_step_summary(check_markdown(result))
    return 0 if result.verdict == "pass" else 1


def _header(options: CheckOptions, prepared: Prepared) -> str:
    contract, not_drawn = prepared.probe.contract, prepared.not_drawn
    low, high = contract.world_sizes
    if options.duration_s is not None:
        budget = f"time budget {options.duration_s:g} s"
    else:
        budget = f"{options.max_examples or profile_settings(options.profile).max_examples} examples"
    lines = [
        f"gather-harness check {options.target}",
        f"  contract: {contract.describe()}",
        f"  {contract.backends[0]}/{contract.devices[0]}, world sizes {low}-{high}, profile {options.profile} "
        f"({budget}), seed {options.seed}, timeout {options.timeout:g} s per case",
        f"  called as {prepared.probe.convention.describe()}",
    ]
    lines += [f"  note: {note}" for note in prepared.probe.notes]
    if not_drawn:
        them = "it" if len(not_drawn) == 1 else "them"
        lines.append(f"  not drawn: {', '.join(not_drawn)} ({contract.backends[0]} cannot all_gather {them})")
    return "\n".join(lines)


def _verdict_text(result: CheckReport, options: CheckOptions) -> str:
    """PASS/FAIL with counts, then every finding with its repro, misuse findings apart."""
    counts = f"{result.examples} examples ({result.elapsed_s:.1f} s)"
    if result.verdict == "pass":
        lines = [f"PASS: no counterexample in {counts}"]
    else:
        names = [f.property for f in result.findings + result.misuse_findings]
        lines = [f"FAIL: {len(names)} propert{'y' if len(names) == 1 else 'ies'} violated ({', '.join(names)}) "
                 f"in {counts}"]
    lines += [f"leak: {leak}" for leak in result.leaks]
    lines += [f"warning: {warning}" for warning in result.warnings()]
    lines += ["\n" + finding_text(finding) for finding in result.findings]
    if options.probe_misuse:
        lines.append(_misuse_summary(result))
        lines += ["\n" + finding_text(finding) for finding in result.misuse_findings]
    return "\n".join(lines)


def _misuse_summary(result: CheckReport) -> str:
    if not result.misuse_examples:
        return "misuse probes: none; the contract leaves no out-of-contract input to probe"
    if not result.misuse_findings:
        return (f"misuse probes: {result.misuse_examples} out-of-contract examples, each raised in time on every "
                f"rank or answered right")
    return f"\nout of contract (--probe-misuse), {result.misuse_examples} examples:"
