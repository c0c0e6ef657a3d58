"""The command line: ``python -m harness check TARGET ...`` and ``python -m harness report``.

``check`` is a stable interface (BRIEF §6): option names, defaults, exit statuses and JSON
keys may be added to, never changed.  Exit status:

- 0: no counterexample;
- 1: a counterexample (wrong values or gradients, a hang, a crash, a misuse failure);
- 2: the target could not be loaded or the arguments are wrong: one line on stderr, nothing
  else (argparse's usage dump is replaced, tracebacks are never shown);
- 3 (added): the harness itself could not run, e.g. the rank pool did not start;
- 130 (added): interrupted.

The CLI process never imports the target: a rank imports it (``harness.api.verify_target``).
``fuzz`` and ``replay`` live in :mod:`harness.fuzz`; ``--listen`` (ranks started by torchrun)
in :mod:`harness.remote`.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shlex
import sys
from collections.abc import Callable, Sequence

from harness import profiles, remote, report
from harness.api import CheckOptions, build_contract, execute, finding_text, prepare, profile_settings
from harness.contract import BACKENDS, DEVICES, GRAD_CONTRACTS, UsageError, parse_world_sizes
from harness.pool import PoolError, PoolGone, shared_pool
from harness.reporting import ProgressLine, check_json, check_markdown, write_json, write_step_summary
from harness.search import CheckReport
from harness.targets import TargetError

PROG = "python -m harness"
_DURATION = re.compile(r"(\d+(?:\.\d*)?)([smh]?)")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``UsageError``), not a usage dump and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return its exit status (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return args.run(args, argv)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (UsageError, TargetError) as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    except (PoolError, PoolGone) as exc:
        print(f"harness error: {one_line(exc)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog=PROG, description="Property-based correctness checks for distributed all_gather.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{check,report,fuzz,replay}")
    check = commands.add_parser(
        "check",
        help="search for a counterexample to a gather(x, dim) meeting its contract",
        description="Search for a counterexample to TARGET meeting its contract, on real gloo/nccl process "
                    "groups. Exit status: 0 none found, 1 counterexample, 2 bad target or arguments.",
    )
    _add_check_arguments(check)
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
    from harness import fuzz  # it builds on this module's options, so it is imported last

    fuzz.register(commands)
    return parser


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET",
                        help="package.module:attr or path/to/file.py:attr naming a gather(x, dim) callable")
    contract = parser.add_argument_group("contract (what TARGET claims)")
    contract.add_argument("--ragged", action=argparse.BooleanOptionalAction, default=True,
                          help="ranks may hold different lengths along dim (default: --ragged)")
    contract.add_argument("--dims", choices=("0", "any"), default="any",
                          help="gather along dim 0 only, or any dim, negative ones included (default: any)")
    contract.add_argument("--grad", choices=GRAD_CONTRACTS, default="none",
                          help="gradient contract: none, local C_r[slot_r], sum Σ_s C_s[slot_r], mean sum/W "
                               "(default: none)")
    contract.add_argument("--dtypes", default="all", metavar="LIST",
                          help="comma list of dtype names and groups all, float, complex, int, bool; with a group, "
                               "dtypes the backend cannot gather are not drawn (default: all)")
    contract.add_argument("--backend", choices=BACKENDS, default="gloo", help="process-group backend (default: gloo)")
    contract.add_argument("--device", choices=DEVICES, default="cpu", help="where the tensors live (default: cpu)")
    per_profile = ", ".join(f"{lo}-{hi} for {name}" for name, (lo, hi) in profiles.WORLD_SIZES.items())
    contract.add_argument("--world-sizes", metavar="A-B",
                          help=f"range of world sizes within 1-8 (default: the profile's: {per_profile})")
    search = parser.add_argument_group("search")
    budget = search.add_mutually_exclusive_group()
    budget.add_argument("--max-examples", type=_positive_int, metavar="N",
                        help="examples to try (default: the Hypothesis profile's)")
    budget.add_argument("--duration", type=parse_duration, metavar="SECONDS|30s|10m",
                        help="a time budget instead of an example count (stops at the first failure)")
    search.add_argument("--seed", type=_seed, metavar="N", help="random seed (default: a fresh one, printed)")
    search.add_argument("--timeout", type=_positive_float, default=10.0, metavar="SECONDS",
                        help="per case: a rank still running after this long is a hang (default: 10)")
    search.add_argument("--profile", choices=tuple(profiles.WORLD_SIZES),
                        help=f"Hypothesis profile (default: ${profiles.PROFILE_ENV}, else ci when $CI is set, else dev)")
    search.add_argument("--probe-misuse", action="store_true",
                        help="also probe out-of-contract input: every rank must raise, not hang or answer wrongly")
    output = parser.add_argument_group("output")
    output.add_argument("--json", metavar="PATH", help="write the verdict and violations as JSON")
    output.add_argument("--repro-dir", default="repros", metavar="DIR",
                        help="where repro scripts of counterexamples go (default: ./repros)")
    output.add_argument("--quiet", action="store_true", help="no header and no progress line")


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables instead of plain text")
    parser.add_argument("--json", metavar="PATH", help="write every variant's report as JSON")
    parser.add_argument("--max-examples", type=_positive_int, default=report.DEFAULT_MAX_EXAMPLES, metavar="N",
                        help=f"examples per variant (default: {report.DEFAULT_MAX_EXAMPLES})")
    parser.add_argument("--variants", metavar="a,b", help="comma list of catalogue names (default: all)")
    parser.add_argument("--probe-misuse", action=argparse.BooleanOptionalAction, default=False,
                        help="also probe out-of-contract input; slow, as equal-only variants hang on ragged "
                             "input by design (default: --no-probe-misuse)")
    parser.add_argument("--timeout", type=_positive_float, default=report.DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"per case: a rank still running after this long is a hang "
                             f"(default: {report.DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def run_report_command(args: argparse.Namespace, argv: list[str]) -> int:
    """``report``: see :mod:`harness.report`."""
    _check_writable("--json", args.json)
    return report.run(variants=args.variants, max_examples=args.max_examples, probe_misuse=args.probe_misuse,
                      timeout=args.timeout, markdown=args.markdown, json_path=args.json, quiet=args.quiet)


def run_check_command(args: argparse.Namespace, argv: list[str]) -> int:
    """``check``: validate everything, search, print the verdict; 0 pass, 1 counterexample."""
    profile = args.profile or profiles.default_name()
    world_sizes = parse_world_sizes(args.world_sizes) if args.world_sizes else profiles.WORLD_SIZES[profile]
    contract = (remote.build_contract if args.listen else build_contract)(
        ragged=args.ragged, dims=args.dims, grad=args.grad, dtype_text=args.dtypes, backend=args.backend,
        device=args.device, world_sizes=world_sizes)
    _check_writable("--json", args.json)
    seed = random.randrange(1_000_000) if args.seed is None else args.seed
    options = CheckOptions(target=args.target, contract=contract, dtype_text=args.dtypes,
                           max_examples=args.max_examples, duration_s=args.duration, seed=seed,
                           timeout=args.timeout, probe_misuse=args.probe_misuse, repro_dir=args.repro_dir,
                           profile=profile)
    pool = remote.pool_from_arguments(args, contract) if args.listen else shared_pool(args.timeout)
    not_drawn = prepare(options, pool)
    if not args.quiet:
        print(_header(options, not_drawn), flush=True)
    progress = None if args.quiet else ProgressLine(label="  ")
    try:
        result = execute(options, pool, on_example=progress)
    finally:
        if progress is not None:
            progress.close()
    rerun = rerun_command(argv, seed)
    print(("" if args.quiet else "\n") + _verdict_text(result, options) + f"\n\nrerun: {rerun}")
    if args.json:
        write_json(args.json, check_json(result, seed=seed, not_drawn=list(not_drawn), command=rerun))
    write_step_summary(check_markdown(result))
    return 0 if result.verdict == "pass" else 1


def _header(options: CheckOptions, not_drawn: tuple[str, ...]) -> str:
    contract = options.contract
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
    ]
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


def rerun_command(argv: Sequence[str], seed: int) -> str:
    """The exact command line again, with ``--seed`` set to the seed this run used."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--seed":
            skip = True
        elif not arg.startswith("--seed="):
            kept.append(arg)
    return shlex.join(["python", "-m", "harness", *kept, "--seed", str(seed)])


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration like 90, 30s or 10m")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (some carry the text of a user's exception)."""
    return " ".join(str(exc).split())


def _check_writable(option: str, path: str | None) -> None:
    """Fail before a long search, not after it, when an output file cannot be written."""
    if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise UsageError(f"{option} {path}: directory {os.path.dirname(os.path.abspath(path))} does not exist")


def _number(convert: type, accept: Callable[[float], bool], what: str) -> Callable[[str], float]:
    """An argparse ``type`` that converts and range-checks, naming what it wanted."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


_positive_int = _number(int, lambda n: n >= 1, "a positive whole number")
_seed = _number(int, lambda n: n >= 0, "a whole number >= 0")
_positive_float = _number(float, lambda n: n > 0, "a positive number of seconds")
