"""Command-line pieces shared by every command: the commands' options, messages.

``check`` and ``fuzz`` take the same contract and search options, generated from the one
table of settings (:mod:`harness.settings.options`), so the two commands and the pytest plugin cannot
drift apart and neither command imports the other.  Every command's options
are defined here, with the commands themselves named by module and function
(:func:`command`), so that parsing the command line imports neither torch nor the engine: a
mistyped option is answered in milliseconds, not after seconds of imports.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from harness.core.errors import UsageError
from harness.settings import options, profile_names
from harness.settings.options import FUZZ_SAVE_EVERY_S, positive_float

PROG = "python -m harness"


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``UsageError``), not a usage dump and exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The command function ``module.name``, imported only when the command runs."""

    def run(args: argparse.Namespace) -> int:
        function: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), name)
        return function(args)

    return run


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (some carry the text of a user's exception)."""
    return " ".join(str(exc).split())


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET",
                        help="package.module:attr or path/to/file.py:attr naming a gather: a function called as f(x), "
                             "f(x, dim) or with dim=/group= keywords, or an autograd.Function class")
    options.add_to_parser(parser)


def add_listen_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``--listen`` and its companions, for ``check`` and ``fuzz`` (see :mod:`harness.remote`)."""
    group = parser.add_argument_group("scale-out (ranks started by torchrun -m harness.remote)")
    options.add_some_to_parser(group, ("listen", "address_file", "connect_timeout"), command)


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables instead of plain text")
    options.add_some_to_parser(parser, ("variants", "json", "html", "max_examples", "probe_misuse", "timeout", "quiet",
                                        "backend", "device", "world_sizes"), "report")


def add_fuzz_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``fuzz`` and ``replay`` (run by :mod:`harness.frontends.fuzz` and :mod:`harness.frontends.replay`) to the CLI's subcommands."""
    fuzz = commands.add_parser(
        "fuzz", help="randomized search over the catalogue (or one TARGET) for a time budget",
        description="Fuzz every catalogue variant against its authors' claim, or one TARGET against the contract "
                    "options, for --duration; keep the example database; rewrite a JSON summary as it goes. "
                    "Exit status: 0 nothing found, 1 something found, 2 bad arguments.")
    _add_fuzz_arguments(fuzz)
    fuzz.set_defaults(run=command("harness.frontends.fuzz", "run_fuzz_command"))
    replay = commands.add_parser(
        "replay", help="run the findings of a fuzz summary again",
        description="Run the cases of a fuzz summary's findings again on fresh ranks. Exit status: 0 every "
                    "case passed, 1 at least one failed again (reproduced, or another property), 2 bad arguments "
                    "or a target this machine cannot import.")
    replay.add_argument("summary", metavar="SUMMARY.json", help="the JSON summary a fuzz run wrote")
    replay.add_argument("--index", type=int, metavar="N", help="only finding N (default: every finding)")
    replay.add_argument("--on-cpu", action="store_true",
                        help="run CUDA cases with gloo on CPU tensors (for a machine without the GPUs)")
    options.add_some_to_parser(replay, ("timeout",), "replay")
    replay.set_defaults(run=command("harness.frontends.replay", "run_replay_command"))


def _add_fuzz_arguments(parser: argparse.ArgumentParser) -> None:
    """``check``'s options with ``fuzz``'s defaults (:data:`harness.settings.options.OPTIONS`): TARGET optional,
    the contract unset (a catalogue variant's own claim applies), a time budget."""
    parser.add_argument("target", metavar="TARGET", nargs="?",
                        help="one gather(x, dim) as in check (default: every catalogue variant, round-robin)")
    options.add_to_parser(parser, "fuzz")
    extra = parser.add_argument_group("fuzz")
    options.add_some_to_parser(extra, ("variants",), "fuzz")
    extra.add_argument("--database", metavar="DIR",
                       help=f"the example database directory (default: ${profile_names.DATABASE_ENV}, else "
                            f".hypothesis/examples)")
    extra.add_argument("--save-every", type=positive_float, default=FUZZ_SAVE_EVERY_S, metavar="SECONDS",
                       help=f"rewrite the summary at least this often (default: {FUZZ_SAVE_EVERY_S:g})")
    add_listen_arguments(parser, "fuzz")
