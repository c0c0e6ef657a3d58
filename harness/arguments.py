"""Command-line pieces shared by every command: the check options, number types, messages.

``check`` and ``fuzz`` take the same contract and search options; both build them here, so
the two commands cannot drift apart and neither imports the other.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Sequence

from harness import files, profiles
from harness.contract import BACKENDS, DEVICES, GRAD_CONTRACTS, OUTPUT_OPTIONS, UsageError, parse_kwarg

PROG = "python -m harness"
_DURATION = re.compile(r"(\d+(?:\.\d*)?)([smh]?)")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``UsageError``), not a usage dump and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


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


def fixed_arguments(texts: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The ``--kwarg NAME=LITERAL`` options as ``(name, literal source)`` pairs (a usage error names a bad one)."""
    return tuple(parse_kwarg(text) for text in texts)


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration like 90, 30s or 10m")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (some carry the text of a user's exception)."""
    return " ".join(str(exc).split())


def _number(convert: Callable[[str], float], accept: Callable[[float], bool], what: str) -> Callable[[str], float]:
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


positive_int = _number(int, lambda n: n >= 1, "a positive whole number")
seed_number = _number(int, lambda n: n >= 0, "a whole number >= 0")
positive_float = _number(float, lambda n: n > 0, "a positive number of seconds")


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET",
                        help="package.module:attr or path/to/file.py:attr naming a gather: a function called as f(x), "
                             "f(x, dim) or with dim=/group= keywords, or an autograd.Function class")
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
    contract.add_argument("--output", choices=OUTPUT_OPTIONS, default="auto",
                          help="how TARGET's result reads: tensor (the concatenation along dim), list (W per-rank "
                               "tensors), stack (a (W, ...) tensor), first (a tuple starting with the "
                               "concatenation); auto: detected by a probe before the search (default: auto)")
    contract.add_argument("--groups", action="store_true",
                          help="also draw subgroup layouts (group ranks != global ranks, disjoint groups, idle "
                               "ranks) and pass group= to TARGET, which must accept it")
    contract.add_argument("--kwarg", dest="kwargs", action="append", default=[], metavar="NAME=LITERAL",
                          help="a fixed argument passed to TARGET on every call, e.g. --kwarg sync_grads=True "
                               "(repeatable; the value is a Python literal: True, 3, 'text', (1, 2), None)")
    contract.add_argument("--no-bits", dest="bits", action="store_false",
                          help="waive bit identity (signed zeros, NaN payloads, bool bytes): values must still be "
                               "equal, NaN to NaN and -0.0 to +0.0 (for gathers built with arithmetic)")
    contract.add_argument("--backend", choices=BACKENDS, default="gloo", help="process-group backend (default: gloo)")
    contract.add_argument("--device", choices=DEVICES, default="cpu", help="where the tensors live (default: cpu)")
    per_profile = ", ".join(f"{lo}-{hi} for {name}" for name, (lo, hi) in profiles.WORLD_SIZES.items())
    contract.add_argument("--world-sizes", metavar="A-B",
                          help=f"range of world sizes within 1-64; local ranks up to what this machine's memory holds "
                               f"(default: the profile's: {per_profile})")
    search = parser.add_argument_group("search")
    budget = search.add_mutually_exclusive_group()
    budget.add_argument("--max-examples", type=positive_int, metavar="N",
                        help="examples to try (default: the Hypothesis profile's)")
    budget.add_argument("--duration", type=parse_duration, metavar="SECONDS|30s|10m",
                        help="a time budget instead of an example count (stops at the first failure)")
    search.add_argument("--seed", type=seed_number, metavar="N", help="random seed (default: a fresh one, printed)")
    search.add_argument("--timeout", type=positive_float, default=10.0, metavar="SECONDS",
                        help="per case: a rank still running after this long is a hang (default: 10)")
    search.add_argument("--profile", choices=tuple(profiles.WORLD_SIZES),
                        help=f"Hypothesis profile (default: ${profiles.PROFILE_ENV}, else ci when $CI is set, else dev)")
    search.add_argument("--probe-misuse", action="store_true",
                        help="also probe out-of-contract input: every rank must raise, not hang or answer wrongly")
    output = parser.add_argument_group("output")
    output.add_argument("--json", metavar="PATH", help="write the verdict and violations as JSON")
    output.add_argument("--repro-dir", default=files.default_path("repros"), metavar="DIR",
                        help=f"where repro scripts of counterexamples go, one folder per target "
                             f"(default: {files.default_path('repros')})")
    output.add_argument("--html", metavar="PATH",
                        help="write the coverage page: examples and failures per world size x dtype and per value of "
                             "every other axis, with the findings (one static file)")
    output.add_argument("--quiet", action="store_true", help="no header, progress line or coverage summary")
