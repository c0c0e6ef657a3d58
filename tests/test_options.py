"""One table of options, bound one way: ``check_gather``, ``check``, ``fuzz`` and the pytest options agree.

:data:`harness.settings.options.OPTIONS` declares every setting; :func:`harness.frontends.api.bind` is the one way
from a front end's values to a check.  These tests hold the front ends to both, without running
a search: the check is stopped where its options are bound.
"""

from __future__ import annotations

import argparse
import inspect
import shlex
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from harness import check_gather
from harness.core.contract import Contract
from harness.core.errors import UsageError
from harness.frontends import api, fuzz
from harness.frontends import commands as cli
from harness.frontends.api import CheckOptions
from harness.settings.options import COMMAND_OPTIONS, OPTIONS, command_line, rerun_line, resolved

TARGET = "harness.ragged:all_gather_ragged"
#: Settings of the command line alone: a time budget and where output goes (check_gather returns a report).
CLI_ONLY = {"duration", "json", "html", "quiet"}


class Stop(UsageError):
    """Raised where the options are bound, so that no check runs (a usage error: exit 2 in the CLI)."""


@pytest.fixture
def bound(monkeypatch: pytest.MonkeyPatch) -> list[Contract]:
    """The contract each front end binds, its check stopped right after."""
    made: list[Contract] = []

    def stopping(real: Callable[..., Any], pick: Callable[[Any], Contract]) -> Callable[..., Any]:
        def bind(*args: Any, **kwargs: Any) -> Any:
            made.append(pick(real(*args, **kwargs)))
            raise Stop("stopped where the options are bound")
        return bind

    monkeypatch.setattr(api, "bind", stopping(api.bind, lambda options: options.contract))
    monkeypatch.setattr(fuzz, "bind", stopping(api.bind, lambda options: options.contract))
    return made


def test_check_gathers_keywords_are_the_tables_settings_with_its_defaults() -> None:
    keywords = {name: parameter.default for name, parameter in inspect.signature(check_gather).parameters.items()
                if name != "gather"}
    table = {option.name: option.default for option in OPTIONS if option.name not in CLI_ONLY}
    assert keywords == {**table, "kwargs": None}  # fixed arguments: a mapping in Python, none by default


def test_the_command_lines_defaults_are_the_tables() -> None:
    args = vars(cli.build_parser().parse_args(["check", TARGET]))
    assert {option.name: args[option.name] for option in OPTIONS} == {
        option.name: list(option.default) if option.kind == "repeat" else option.default for option in OPTIONS}


#: Options of one command that are not settings of a run: how a report prints, fuzz's database and
#: saving, which findings a replay runs again.
COMMAND_FLAGS = {"--markdown", "--database", "--save-every", "--index", "--on-cpu"}


def flags_of(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Each subcommand's option strings (``--listen``, ``--no-ragged``), help left out."""
    [subcommands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return {name: {flag for action in sub._actions for flag in action.option_strings if flag not in ("-h", "--help")}
            for name, sub in subcommands.choices.items()}


def test_every_option_of_every_command_is_a_row_of_the_table() -> None:
    """``--listen``, ``--connect-timeout`` and ``--variants`` too (:data:`COMMAND_OPTIONS`): one row, one parser."""
    rows = {flag for option in (*OPTIONS, *COMMAND_OPTIONS)
            for flag in (f"--{option.spelled}", f"--no-{option.spelled}")}
    strays = {command: flags - rows - COMMAND_FLAGS for command, flags in flags_of(cli.build_parser()).items()}
    assert {command: flags for command, flags in strays.items() if flags} == {}
    assert {"--listen", "--connect-timeout"} <= flags_of(cli.build_parser())["fuzz"]


def test_the_option_rows_check_finds_a_planted_stray_option() -> None:
    parser = cli.build_parser()
    [subcommands] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    subcommands.choices["check"].add_argument("--stray")
    rows = {f"--{option.spelled}" for option in (*OPTIONS, *COMMAND_OPTIONS)}
    assert "--stray" in flags_of(parser)["check"] - rows


def test_every_plugin_option_is_registered_with_the_tables_default(pytestconfig: pytest.Config) -> None:
    for option in OPTIONS:
        if option.plugin:
            value = pytestconfig.getoption(f"gather_{option.spelled.replace('-', '_')}")
            want = None if option.fixture else list(option.default) if option.kind == "repeat" else option.default
            assert value == want, option.name


def test_the_nightly_profile_draws_the_same_world_sizes_from_every_front_end(bound: list[Contract]) -> None:
    with pytest.raises(Stop):
        check_gather(TARGET, profile="nightly")
    assert cli.main(["check", TARGET, "--profile", "nightly"]) == 2
    assert cli.main(["fuzz", TARGET, "--profile", "nightly", "--duration", "1"]) == 2
    assert [contract.world_sizes for contract in bound] == [(1, 8)] * 3


def test_world_sizes_given_win_over_the_profiles(bound: list[Contract]) -> None:
    with pytest.raises(Stop):
        check_gather(TARGET, profile="nightly", world_sizes=(2, 3))
    assert cli.main(["check", TARGET, "--profile", "nightly", "--world-sizes", "2-3"]) == 2
    assert [contract.world_sizes for contract in bound] == [(2, 3)] * 2


def test_the_rerun_line_is_the_table_spelling_the_check_again() -> None:
    options = api.bind({"grad": "sum", "ragged": False, "kwargs": {"sync_grads": True}, "timeout": 3.0,
                        "world_sizes": (2, 3), "seed": 7, "profile": "ci", "max_examples": 5}, TARGET)
    assert api.bind({}, TARGET).profile is None  # not given: the default profile, left out of the line
    line = api.check_command(options)
    assert line == ("python -m harness check harness.ragged:all_gather_ragged --no-ragged --grad sum "
                    "--kwarg sync_grads=True --world-sizes 2-3 --max-examples 5 --timeout 3 --profile ci --seed 7")
    args = vars(cli.build_parser().parse_args(line.split()[3:]))
    again = api.bind(args, args["target"])
    assert again == options  # the line binds to the same check


def test_a_bad_value_names_the_option_as_the_front_end_spells_it() -> None:
    with pytest.raises(UsageError, match="^--gather-timeout: 'soon' is not a positive number"):
        resolved({"timeout": "soon"}, prefix="--gather-")
    with pytest.raises(UsageError, match="^--kwarg 'oops': expected NAME=LITERAL"):
        resolved({"kwargs": ["oops"]})
    with pytest.raises(UsageError, match="--world-sizes 1-2: with --listen the world size is the torchrun job's"):
        api.bind({"world_sizes": "1-2"}, TARGET, listen=True)


def test_command_line_leaves_out_defaults_and_output() -> None:
    settings = resolved({"json": "x.json", "quiet": True, "world_sizes": (1, 4)})
    assert command_line(settings) == ["--world-sizes", "1-4"]
    assert isinstance(api.bind(settings, TARGET), CheckOptions)


#: For every setting a rerun line repeats, a value other than ``check``'s default, with the other
#: settings that value needs (an op belongs to a reduce-scatter, a re-layout's dims to an all-to-all).
NOT_THE_DEFAULT: dict[str, tuple[Any, dict[str, Any]]] = {
    "collective": ("reduce-scatter", {}),
    "op": ("max", {"collective": "reduce-scatter"}),
    "src": (1, {"collective": "broadcast", "world_sizes": (2, 3)}),
    "src_rank": ("group", {"collective": "broadcast"}),
    "dst": (1, {"collective": "reduce", "world_sizes": (2, 3)}),
    "ragged": (False, {}),
    "dims": ("-1", {}),
    "scatter_dim": ("2", {"collective": "all-to-all", "gather_dim": "1"}),
    "gather_dim": ("1", {"collective": "all-to-all", "scatter_dim": "2"}),
    "ndims": ((2, 3), {}),
    "grad": ("sum", {}),
    "dtypes": ("float32,int64", {}),
    "output": ("list", {}),
    "groups": (False, {}),
    "kwargs": ({"sync_grads": True, "tag": "a b"}, {}),
    "compile": (True, {}),
    "bits": (False, {}),
    "backend": ("nccl", {"device": "cuda"}),
    "device": ("cuda", {}),
    "world_sizes": ((2, 5), {}),
    "max_examples": (7, {}),
    "duration": (12.5, {}),
    "timeout": (2.5, {}),
    "profile": ("nightly", {}),
    "probe_misuse": (True, {}),
}


@pytest.mark.parametrize("name", [option.name for option in OPTIONS if option.section != "output" and option.name != "seed"])
def test_every_setting_survives_its_rerun_line(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bound, written as the rerun line every front end prints (:func:`api.check_command`), parsed by
    ``check`` and bound again: the same check.  A setting the line forgot, or spelled so that it
    parses to another value, fails here (the machine is not asked: nccl binds on a CPU box)."""
    monkeypatch.setattr(api, "check_machine", lambda *args, **kwargs: None)
    value, needs = NOT_THE_DEFAULT[name]
    options = api.bind({**needs, name: value, "seed": 3}, TARGET)
    line = api.check_command(options)
    spelled = next(option.spelled for option in OPTIONS if option.name == name)
    assert f"--{spelled}" in line or f"--no-{spelled}" in line
    args = vars(cli.build_parser().parse_args(shlex.split(line)[3:]))
    assert api.bind(args, args["target"]) == options


def test_output_settings_stay_out_of_the_rerun_line() -> None:
    """Where a run's output went is not part of the check: the rerun line prints to the terminal."""
    options = api.bind({"seed": 3}, TARGET)
    assert [option.name for option in OPTIONS if option.section == "output"] == [
        "json", "repro_dir", "html", "quiet", "full_stacks"]
    assert api.check_command(options) == api.check_command(replace(options, repro_dir="elsewhere", full_stacks=True))


def test_fuzzs_summary_command_runs_the_same_fuzz_again() -> None:
    """``fuzz`` writes its rerun line with the same writer (:func:`rerun_line`): its own defaults are
    left out, its own options (``--variants``, ``--duration``) kept."""
    argv = ["fuzz", "--variants", "plain,padded", "--duration", "30", "--timeout", "4", "--seed", "1"]
    values = {**resolved(vars(cli.build_parser().parse_args(argv)), "fuzz"), "variants": "plain,padded"}
    line = rerun_line("fuzz", values, 99)
    assert line == "python -m harness fuzz --duration 30 --timeout 4 --variants plain,padded --seed 99"
    again = vars(cli.build_parser().parse_args(shlex.split(line)[3:]))
    assert {**resolved(again, "fuzz"), "seed": 1} == {**resolved(vars(cli.build_parser().parse_args(argv)), "fuzz")}
