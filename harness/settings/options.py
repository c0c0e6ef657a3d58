"""Every setting of a check, declared once: its name, type, default and help.

The command line (:mod:`harness.frontends.arguments`), the pytest plugin (:mod:`harness.plugin`) and
the Python API's defaults are all read off :data:`OPTIONS`, so a new setting is one row here and
the front ends cannot drift apart; :func:`resolved` turns any front end's values into settings.
Plain data, importing neither torch nor Hypothesis: parsing a command line must stay fast.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.core.contract import (
    BACKENDS,
    BITWISE_OPS,
    COLLECTIVES,
    DEVICES,
    GRAD_CONTRACTS,
    OP_ALIASES,
    OUTPUT_OPTIONS,
    REDUCING_OPS,
    SRC_RANKS,
    Contract,
    literal_kwargs,
    parse_dtypes,
    parse_kwarg,
    parse_world_sizes,
)
from harness.core.errors import UsageError
from harness.core.outputs import OUTPUTS
from harness.settings import files, profile_names

#: Per case: ranks not back after this long, and idle, are a hang.  The one default every front end
#: and the engine share.
DEFAULT_TIMEOUT_S = 10.0
#: How many times its timeout a case whose ranks are still busy may take (:class:`harness.pool.watch.Watch`).
PATIENCE = 5.0
#: How many times a case's timeout a rank inside ``torch.compile`` may take (``harness.pool.watch``): a
#: first inductor compile takes seconds to minutes on a CPU, and it is the compiler's time.
COMPILE_PATIENCE = 30.0
#: ``report``: examples per variant, and a per-case timeout shorter than ``check``'s: a correct
#: case takes milliseconds, and every hanging example costs this much, again at each shrink step.
REPORT_MAX_EXAMPLES = 60
REPORT_TIMEOUT_S = 5.0
#: ``fuzz``: its default time budget, summary file and how often the summary is rewritten.
FUZZ_DURATION_S = 600.0
FUZZ_SUMMARY = files.default_path("fuzz.json")
FUZZ_SAVE_EVERY_S = 30.0
#: ``--listen``: how long the driver waits for the torchrun job's ranks.
CONNECT_TIMEOUT_S = 600.0


def timeout_help(default: float) -> str:
    """What ``--timeout`` means, in every command that takes it."""
    return (f"per case: ranks not back after this long and idle (asleep in a wait) are a hang; busy ones get up to "
            f"{PATIENCE:g}x as long (default: {default:g})")
_DURATION = re.compile(r"(\d+(?:\.\d*)?)([smh]?)")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Option:
    """One setting.

    ``name`` is the Python keyword and the CLI's ``dest``; ``flag`` its command-line spelling
    (``--flag``; the plugin's is ``--gather-flag``).  ``kind`` says how it is spelled there:

    - ``value``: ``--flag VALUE``, converted by ``type`` (``str`` when ``None``);
    - ``switch``: ``--flag`` sets it true;
    - ``negatable``: ``--flag`` / ``--no-flag`` (default true);
    - ``waivable``: only ``--no-flag``, which sets it false (default true);
    - ``repeat``: ``--flag VALUE``, any number of times, collected in a list;
    - ``optional``: ``--flag [VALUE]``, a bare ``--flag`` meaning ``const``.

    ``section`` is the CLI's help group; contract and search settings are what a ``check``
    command line repeats (:func:`command_line`).  ``fixture``: a budget the ``gather_check``
    fixture fills in from the session, so its pytest default is ``None``.  ``defaults`` and
    ``helps``: another command's default and help, by command name.
    """

    name: str
    help: str
    default: Any = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    kind: str = "value"
    section: str = "search"
    flag: str = ""
    plugin: bool = True
    fixture: bool = False
    plugin_default: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)
    const: Any = None

    @property
    def spelled(self) -> str:
        """The option's word on a command line: ``world-sizes`` for ``world_sizes``."""
        return self.flag or self.name.replace("_", "-")

    def default_in(self, command: str) -> Any:
        return self.defaults.get(command, self.default)

    def help_in(self, command: str) -> str:
        return self.helps.get(command, self.help)


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


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration like 90, 30s or 10m")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


_PER_PROFILE = ", ".join(f"{lo}-{hi} for {name}" for name, (lo, hi) in profile_names.WORLD_SIZES.items())

#: Every reduction a collective takes (``--op``), in the table's order, and the names torch also uses.
REDUCTIONS: tuple[str, ...] = (*dict.fromkeys(op for kind in COLLECTIVES.values() for op in kind.ops), *OP_ALIASES)

#: The settings of a check, in the order ``--help`` lists them.
OPTIONS: tuple[Option, ...] = (
    Option("collective", "what TARGET computes on rank r: "
           + "; ".join(f"{collective.name}, {collective.means}" for collective in COLLECTIVES.values())
           + " (default: gather)", "gather", choices=tuple(COLLECTIVES), section="contract"),
    Option("op", f"the reduction of a reduce-scatter ({', '.join(COLLECTIVES['reduce-scatter'].ops)}; mean: the sum / W), "
                 f"an all-reduce or a reduce ({', '.join(REDUCING_OPS)}; product and {', '.join(BITWISE_OPS)}: integers); "
                 "avg is mean (default: sum)", "sum", choices=REDUCTIONS, section="contract"),
    Option("src", "a broadcast's or a scatter's source, as a rank in each group (default: 0)", 0, type=int,
           metavar="N", section="contract"),
    Option("dst", "a reduce's or a gather-to's destination, as a rank in each group: only its result is judged "
                  "(default: 0)", 0, type=int, metavar="N", section="contract"),
    Option("src_rank", "how TARGET takes its source or destination: global (c10d's dist.broadcast(x, src)) or group "
                       "(funcol's broadcast; a parameter named group_src or group_dst always is) (default: global)",
           "global",
           choices=SRC_RANKS, section="contract"),
    Option("ragged", "ranks may hold different lengths along dim (default: --ragged)", True, kind="negatable",
           section="contract", defaults={"fuzz": None}),
    Option("dims", "any: TARGET gathers (scatters, exchanges) along the dim it is given, drawn over the input's dims, "
                   "negative ones included; N: along dim N only, e.g. -1 for a tensor-parallel gather of the last dim "
                   "(default: any; a TARGET that takes no dim: the dim the probe sees it work along)", "any",
           metavar="any|N", section="contract", defaults={"fuzz": None}),
    Option("scatter_dim", "an all-to-all that is a re-layout (sequence-parallel attention: heads for sequence): the "
                          "dim each rank splits into one piece per rank; any: drawn over the input's dims (default: "
                          "any, when TARGET takes both dims, e.g. scatter_idx and gather_idx)", metavar="any|N",
           section="contract"),
    Option("gather_dim", "a re-layout's dim the pieces received are concatenated along, the one ranks may hold "
                         "different lengths along; any: drawn (default: any, when TARGET takes both dims; a TARGET "
                         "taking neither needs both fixed)", metavar="any|N", section="contract"),
    Option("ndims", "the dims of drawn inputs, a range within 1-4 (default: 1-4; a re-layout's 3-4: batch, sequence, "
                    "heads)", metavar="A-B", section="contract"),
    Option("grad", "gradient contract: none, local C_r[slot_r], sum \u03a3_s C_s[slot_r], mean sum/W; for "
                   "reduce-scatter and all-to-all: adjoint, the reverse collective of the cotangents; for all-reduce: "
                   "identity C_r, sum \u03a3_s C_s, mean sum/W (default: none)",
           "none", choices=GRAD_CONTRACTS, section="contract", defaults={"fuzz": None}),
    Option("dtypes", "comma list of dtype names and groups all, float, complex, int, bool; with a group, dtypes the "
                     "backend cannot gather are not drawn (default: all)", "all", metavar="LIST", section="contract",
           defaults={"fuzz": None}),
    Option("output", "how TARGET's result reads: "
           + ", ".join(f"{output.name} ({output.means})" for output in OUTPUTS.values())
           + "; auto: detected by a probe before the search (default: auto)", "auto", choices=OUTPUT_OPTIONS,
           section="contract"),
    Option("groups", "draw subgroup layouts (group ranks != global ranks, several groups, idle ranks) and pass "
                     "group= to TARGET, which must accept it (default: when TARGET takes a group; --no-groups: the "
                     "world group only)", None, kind="negatable", section="contract"),
    Option("kwargs", "a fixed argument passed to TARGET on every call, e.g. --kwarg sync_grads=True (repeatable; the "
                     "value is a Python literal: True, 3, 'text', (1, 2), None)", (), metavar="NAME=LITERAL",
           kind="repeat", section="contract", flag="kwarg"),
    Option("compile", "call TARGET through torch.compile (its default backend), one compiled wrapper per target, "
                      "judged against the same reference: compile-only bugs are found and named so", False,
           kind="switch", section="contract"),
    Option("bits", "waive bit identity (signed zeros, NaN payloads, bool bytes): values must still be equal, NaN to "
                   "NaN and -0.0 to +0.0 (for gathers built with arithmetic)", True, kind="waivable",
           section="contract"),
    Option("backend", "process-group backend (default: gloo)", "gloo", choices=BACKENDS, section="contract"),
    Option("device", "where the tensors live (default: cpu)", "cpu", choices=DEVICES, section="contract"),
    Option("world_sizes", f"range of world sizes within 1-64; local ranks up to what this machine's memory holds "
                          f"(default: the profile's: {_PER_PROFILE})", metavar="A-B", section="contract",
           helps={"report": "check every variant at these world sizes (default: each variant's own; with --backend "
                            "nccl, capped at the GPUs torch sees)"}),
    Option("max_examples", "examples to try (default: the Hypothesis profile's)", type=positive_int, metavar="N",
           section="budget", fixture=True, defaults={"report": REPORT_MAX_EXAMPLES},
           helps={"report": f"examples per variant (default: {REPORT_MAX_EXAMPLES})",
                  "fuzz": "stop after N examples in all instead of after a time budget"}),
    Option("duration", "a time budget instead of an example count (stops at the first failure)",
           type=parse_duration, metavar="SECONDS|30s|10m", section="budget", plugin=False,
           helps={"fuzz": f"time budget: SECONDS, 30s, 10m, 1h (default: {FUZZ_DURATION_S / 60:g}m)"}),
    Option("seed", "random seed (default: a fresh one, printed)", type=seed_number, metavar="N",
           fixture=True, plugin_default="0"),
    Option("timeout", timeout_help(DEFAULT_TIMEOUT_S),
           DEFAULT_TIMEOUT_S, type=positive_float, metavar="SECONDS", fixture=True,
           defaults={"report": REPORT_TIMEOUT_S}, helps={"report": timeout_help(REPORT_TIMEOUT_S)}),
    Option("profile", f"Hypothesis profile (default: ${profile_names.PROFILE_ENV}, else ci when $CI is set, else dev)",
           choices=tuple(profile_names.WORLD_SIZES), plugin=False, defaults={"fuzz": "fuzz"},
           helps={"fuzz": "Hypothesis profile (default: fuzz: database kept, world sizes 1-8)"}),
    Option("probe_misuse", "also probe out-of-contract input: every rank must raise, not hang or answer wrongly",
           False, kind="switch", fixture=True,
           helps={"report": "also probe out-of-contract input; slow, as equal-only variants hang on ragged input by "
                            "design"}),
    Option("json", "write the verdict and violations as JSON", metavar="PATH", section="output", plugin=False,
           defaults={"fuzz": FUZZ_SUMMARY},
           helps={"fuzz": f"the JSON summary, rewritten as the run goes (default: {FUZZ_SUMMARY})",
                  "report": "write every variant's report as JSON"}),
    Option("repro_dir", f"where repro scripts of counterexamples go, one folder per target (default: "
                        f"{files.default_path('repros')})", files.default_path("repros"),
           metavar="DIR", section="output", fixture=True, plugin_default=f"<rootdir>/{files.default_path('repros')}"),
    Option("html", "write the coverage page: examples and failures per world size x dtype and per value of every "
                   "other axis, with the findings (one static file)", metavar="PATH", section="output",
           helps={"fuzz": "the coverage page, rewritten with the summary (default: beside it, .html)",
                  "report": "write the coverage page of the whole report"}),
    Option("quiet", "no header, progress line or coverage summary", False, kind="switch", section="output",
           plugin=False, helps={"report": "no progress lines and no coverage summary"}),
    Option("full_stacks", "show every frame of a hanging or failing rank's stack, the harness's, multiprocessing's "
                          "and torch's included (default: the target's own frames and the collective it is in; the "
                          "JSON always has them all)", False, kind="switch", section="output", fixture=True),
)

#: The options of some commands besides a check's settings (:data:`OPTIONS`), declared the same
#: way and added by the same parser (:func:`add_some_to_parser`): every option has one row.
COMMAND_OPTIONS: tuple[Option, ...] = (
    Option("listen", "serve ranks started by torchrun instead of local ones: listen on HOST:PORT (bare --listen: "
           "every interface, any free port) and print the address; the cases' world size is the job's, given with "
           "--world-sizes W", metavar="HOST:PORT", kind="optional", const="0.0.0.0:0", plugin=False),
    Option("address_file", "with --listen: also write HOST:PORT to PATH", metavar="PATH", section="output",
           plugin=False),
    Option("connect_timeout", f"with --listen: how long to wait for the job's ranks (default: {CONNECT_TIMEOUT_S:g})",
           CONNECT_TIMEOUT_S, type=float, metavar="SECONDS", plugin=False),
    Option("variants", "only these catalogue variants, a comma list, or all (default: all)", metavar="a,b",
           plugin=False, helps={"report": "comma list of catalogue names (default: all)"}),
)
_BY_NAME = {option.name: option for option in (*OPTIONS, *COMMAND_OPTIONS)}
_SECTIONS = {"contract": "contract (what TARGET claims)", "search": "search", "output": "output"}


def default(name: str) -> Any:
    """The default of setting ``name`` (the API's keyword defaults are these)."""
    return _BY_NAME[name].default


def add_to_parser(parser: argparse.ArgumentParser, command: str = "check") -> None:
    """Every option of :data:`OPTIONS` as ``command``'s options (``check``'s and ``fuzz``'s), in their help groups."""
    groups = {key: parser.add_argument_group(title) for key, title in _SECTIONS.items()}
    groups["budget"] = groups["search"].add_mutually_exclusive_group()
    for option in OPTIONS:
        _add(groups[option.section], option, command)


def add_some_to_parser(parser: argparse.ArgumentParser | argparse._ArgumentGroup, names: tuple[str, ...],
                       command: str) -> None:
    """The rows ``names`` of :data:`OPTIONS` or :data:`COMMAND_OPTIONS` as plain options of ``command``
    (``report``, ``replay``, the scale-out group), on a parser or one of its groups."""
    for name in names:
        _add(parser, _BY_NAME[name], command)


def _add(container: Any, option: Option, command: str) -> None:
    """``option`` as ``command`` spells, defaults and explains it, on a parser or one of its groups."""
    container.add_argument(*_cli_spelling(option), dest=option.name, help=option.help_in(command),
                           **_argparse_keywords(option, command))


def _cli_spelling(option: Option) -> tuple[str, ...]:
    return (f"--no-{option.spelled}",) if option.kind == "waivable" else (f"--{option.spelled}",)


def _argparse_keywords(option: Option, command: str = "check") -> dict[str, Any]:
    default = option.default_in(command)
    if option.kind == "switch":
        return {"action": "store_true"}
    if option.kind == "waivable":
        return {"action": "store_false"}
    if option.kind == "negatable":
        return {"action": argparse.BooleanOptionalAction, "default": default}
    keywords: dict[str, Any] = {"metavar": option.metavar, "choices": option.choices}
    if option.type is not None:
        keywords["type"] = option.type
    if option.kind == "repeat":
        return {**keywords, "action": "append", "default": list(default)}
    if option.kind == "optional":
        return {**keywords, "nargs": "?", "const": option.const, "default": default}
    return {**keywords, "default": default}


def add_to_pytest(group: Any) -> None:
    """Every plugin option of :data:`OPTIONS` as ``--gather-*`` options of a pytest option group.

    Values stay text (:func:`option_value` converts them, so that a bad one is the plugin's
    usage error naming the option, not argparse's); a fixture budget option defaults to
    ``None`` so that a ``gather_check`` call's own keyword wins over no option.
    """
    for option in OPTIONS:
        if not option.plugin:
            continue
        flag, dest = f"--gather-{option.spelled}", f"gather_{option.spelled.replace('-', '_')}"
        text = _plugin_help(option)
        if option.kind == "negatable":
            group.addoption(flag, dest=dest, action="store_true", default=option.default, help=text)
            group.addoption(f"--gather-no-{option.spelled}", dest=dest, action="store_false",
                            help=f"the opposite of {flag}")
        elif option.kind == "waivable":
            group.addoption(f"--gather-no-{option.spelled}", dest=dest, action="store_false", default=True, help=text)
        else:
            keywords = {key: value for key, value in _argparse_keywords(option).items() if key != "type"}
            if option.fixture:
                keywords["default"] = None
            group.addoption(flag, dest=dest, help=text, **keywords)


def _plugin_help(option: Option) -> str:
    """``option``'s help as the plugin spells options, with the plugin's own default."""
    text = option.help.replace("--", "--gather-")
    if option.plugin_default:
        text = re.sub(r"\(default: [^)]*\)$", f"(default: {option.plugin_default})", text)
    return text


def option_value(option: Option, value: Any, prefix: str = "--gather-") -> Any:
    """The value of an option given as text (a ``--gather-*`` option), converted by the option's
    type; a bad one raises :class:`~harness.core.errors.UsageError` naming the option as spelled."""
    if option.type is None or not isinstance(value, str):
        return value
    try:
        return option.type(value)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{prefix}{option.spelled}: {exc}") from None


def resolved(values: Mapping[str, Any], command: str = "check", prefix: str = "--") -> dict[str, Any]:
    """Every setting of a check from any front end's ``values`` (text from a command line, Python
    values from ``check_gather``), in one form: a missing or ``None`` value is ``command``'s default,
    text is converted by the option's type, ``dims`` is text, ``dtypes`` a comma list, ``kwargs``
    ``(name, literal source)`` pairs and ``world_sizes`` a ``(low, high)`` pair, or ``None`` for
    the profile's (which needs the machine: :func:`harness.frontends.api.bind`).  A bad value is a
    :class:`~harness.core.errors.UsageError` naming the option as ``prefix`` spells it."""
    out: dict[str, Any] = {}
    for option in OPTIONS:
        value = values.get(option.name)
        value = option.default_in(command) if value is None else option_value(option, value, prefix)
        out[option.name] = value
    out["dims"] = None if out["dims"] is None else str(out["dims"])
    for name in ("scatter_dim", "gather_dim"):
        out[name] = None if out[name] is None else str(out[name])
    if isinstance(out["ndims"], str):
        out["ndims"] = _dims_range(out["ndims"], f"{prefix}ndims")
    elif out["ndims"] is not None:
        out["ndims"] = (int(out["ndims"][0]), int(out["ndims"][1]))
    if out["dtypes"] is not None and not isinstance(out["dtypes"], str):
        out["dtypes"] = ",".join(out["dtypes"])
    out["kwargs"] = _pairs(out["kwargs"], f"{prefix}kwarg")
    if isinstance(out["world_sizes"], str):
        out["world_sizes"] = parse_world_sizes(out["world_sizes"])
    elif out["world_sizes"] is not None:
        low, high = out["world_sizes"]
        out["world_sizes"] = (int(low), int(high))
    return out


def _dims_range(text: str, flag: str) -> tuple[int, int]:
    """``"3-4"`` -> (3, 4); ``"4"`` -> (4, 4)."""
    low, _, high = text.partition("-")
    try:
        return int(low), int(high or low)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a range like 3-4") from None


def _pairs(kwargs: Any, flag: str) -> tuple[tuple[str, str], ...]:
    """``--kwarg`` texts (``NAME=LITERAL``), a mapping of Python values, or pairs already: pairs."""
    if isinstance(kwargs, Mapping):
        return literal_kwargs(kwargs)
    return tuple(parse_kwarg(item, flag) if isinstance(item, str) else (item[0], item[1]) for item in kwargs)


def command_line(values: Mapping[str, Any], command: str = "check") -> list[str]:
    """The options of ``command`` that say ``values`` (as :func:`resolved` gives them, with any of
    :data:`COMMAND_OPTIONS`), in the table's order: each contract and search setting that differs
    from ``command``'s default, and the world sizes always (the profile's range may change);
    ``seed`` is the caller's, last."""
    words: list[str] = []
    for option in (*OPTIONS, *COMMAND_OPTIONS):
        value = values.get(option.name)
        if option.section == "output" or option.name == "seed" or value is None:
            continue
        if option.name != "world_sizes" and value == _comparable(option.default_in(command)):
            continue
        words += _spelled(option, value)
    return words


def rerun_line(command: str, values: Mapping[str, Any], seed: int, target: str | None = None) -> str:
    """``python -m harness COMMAND [TARGET] OPTIONS --seed N``: the run again, as every front end
    writes it (``check``'s rerun line, pytest's, ``fuzz``'s summary)."""
    words = ["python", "-m", "harness", command, *([target] if target else []), *command_line(values, command)]
    return shlex.join([*words, "--seed", str(seed)])


def _comparable(default: Any) -> Any:
    return tuple(default) if isinstance(default, list) else default


def _spelled(option: Option, value: Any) -> list[str]:
    flag = f"--{option.spelled}"
    if option.kind == "switch":
        return [flag] if value else []
    if option.kind in ("negatable", "waivable"):
        return [flag if value else f"--no-{option.spelled}"]
    if option.kind == "repeat":
        return [word for name, literal in value for word in (flag, f"{name}={literal}")]
    if option.name in ("world_sizes", "ndims"):
        return [flag, "{}-{}".format(*value)]
    return [flag, f"{value:g}" if isinstance(value, float) else str(value)]


def contract_of(settings: Mapping[str, Any], world_sizes: tuple[int, int]) -> Contract:
    """The contract :func:`resolved` ``settings`` claim over ``world_sizes``, its flags checked against each
    other (:class:`UsageError`).  torch-free: ``check`` refuses a contradiction before torch or any rank
    starts (the machine's own checks come later, :func:`harness.frontends.api.bind_contract`)."""
    return Contract(ragged=settings["ragged"], dims=settings["dims"], dtypes=parse_dtypes(settings["dtypes"]),
                    scatter_dim=settings["scatter_dim"] or "", gather_dim=settings["gather_dim"] or "",
                    ndims=settings["ndims"], grad=settings["grad"], backends=(settings["backend"],),
                    devices=(settings["device"],), world_sizes=world_sizes, output=settings["output"],
                    groups=settings["groups"], kwargs=settings["kwargs"], bits=settings["bits"],
                    collective=settings["collective"], op=settings["op"], compile=settings["compile"],
                    src=settings["src"], src_rank=settings["src_rank"], dst=settings["dst"])
