"""The Python API, and the steps every front end shares (CLI ``check``, ``fuzz``, ``report``, pytest plugin).

Use it from another project's test suite::

    from harness import check_gather

    def test_my_gather():
        check_gather("mypkg.dist:gather", ragged=True, grad="sum")   # or pass the function

``check_gather`` returns the :class:`~harness.search.results.CheckReport`, or raises
``AssertionError`` whose first line is the verdict and whose text is the counterexample, with
its notes.  A passing check's notes are :class:`GatherNote` warnings, a hang no replay
reproduced an :class:`~harness.search.finding.UnreproducedFaultWarning`, a harness that cannot run a
:class:`~harness.core.errors.PoolError`.  Ranks import the target, never the caller's process, so
a gather that hangs or aborts cannot take the test run down with it.

Every front end goes through :func:`bind` (options to a check; nothing started), :func:`prepare`
(capabilities measured, the calling convention probed) and :func:`execute` (the search, then
hints and repro scripts), so they cannot drift apart.
"""

from __future__ import annotations

import os
import shlex
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch
from hypothesis import settings

from harness.core.contract import DTYPE_GROUPS, Contract
from harness.core.errors import UsageError, check_failed
from harness.layers import engine_file
from harness.pool import capabilities
from harness.pool.machine import check_machine, within_gpus
from harness.pool.pool import Pool, shared_pool
from harness.ranks import targets
from harness.ranks.targets import shown_target
from harness.report import hints, minimal_repro, repro
from harness.report.text import failure_summary, failure_text
from harness.search.engine import SearchSettings, run_check
from harness.search.finding import UnreproducedFaultWarning
from harness.search.probe import Probe, probe, refuse_unfit_signature
from harness.search.results import CheckReport, Progress
from harness.settings import profile_names, profiles
from harness.settings.options import contract_of, default, rerun_line, resolved
from harness.strategies import simplest_first

DEFAULT_REPRO_DIR = default("repro_dir")


@dataclass(frozen=True)
class CheckOptions:
    """One check as its user asked for it: the target, its claimed contract, the search budget.

    ``dtype_text`` is ``--dtypes`` as written: a dtype the backend cannot gather is skipped when
    it came from a group (``all``, ``int``) and refused when named.  ``annotate`` (off for the
    catalogue report) adds the differentiable-target note, hints and repro scripts; the fields
    after it go to the engine (:class:`~harness.search.engine.SearchSettings`).
    """

    target: str
    contract: Contract
    dtype_text: str = default("dtypes")
    max_examples: int | None = default("max_examples")
    duration_s: float | None = default("duration")
    seed: int | None = default("seed")
    timeout: float = default("timeout")
    probe_misuse: bool = default("probe_misuse")
    repro_dir: str = default("repro_dir")
    profile: str | None = default("profile")
    #: Show every frame of a failing rank's stack, not only the target's own.
    full_stacks: bool = default("full_stacks")
    annotate: bool = True
    track_semantics: bool = SearchSettings.track_semantics
    shrink_budget_s: float = SearchSettings.shrink_budget_s
    shrink_fault_steps: int | None = SearchSettings.shrink_fault_steps
    max_shrink_steps: int = SearchSettings.max_shrink_steps
    #: The fuzz engine's batches (:attr:`harness.search.engine.SearchSettings.batches`).
    batches: bool = SearchSettings.batches
    #: Strata and Hypothesis's draws in batches until something fails (:attr:`harness.search.engine.SearchSettings.ahead`).
    ahead: bool = SearchSettings.ahead

    def option_values(self) -> dict[str, Any]:
        """These options as :data:`~harness.settings.options.OPTIONS` values (what :func:`bind` was given)."""
        contract = self.contract
        return {"collective": contract.collective, "op": contract.op, "src": contract.src,
                "src_rank": contract.src_rank, "dst": contract.dst, "ragged": contract.ragged, "dims": contract.dims,
                "scatter_dim": contract.scatter_dim or None, "gather_dim": contract.gather_dim or None,
                "ndims": contract.ndims,
                "grad": contract.grad, "dtypes": self.dtype_text, "output": contract.output, "groups": contract.groups,
                "kwargs": contract.kwargs, "bits": contract.bits, "compile": contract.compile,
                "backend": contract.backend,
                "device": contract.device, "world_sizes": contract.world_sizes,
                "max_examples": self.max_examples, "duration": self.duration_s, "seed": self.seed,
                "timeout": self.timeout, "profile": self.profile, "probe_misuse": self.probe_misuse}

    def search_settings(self) -> SearchSettings:
        """What the engine needs of these options, the profile's Hypothesis settings included."""
        return SearchSettings(max_examples=self.max_examples, duration_s=self.duration_s, seed=self.seed,
                              timeout_s=self.timeout, probe_misuse=self.probe_misuse,
                              base_settings=profile_settings(self.profile), shrink_budget_s=self.shrink_budget_s,
                              shrink_fault_steps=self.shrink_fault_steps, max_shrink_steps=self.max_shrink_steps,
                              track_semantics=self.track_semantics, batches=self.batches, ahead=self.ahead)


class GatherNote(UserWarning):
    """Something a check saw that breaks no property but the user should know (pytest lists it)."""


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` learned before the search: the dtypes not drawn, and the probe's
    verdict (the calling convention, the contract it implies, or the probe case that failed)."""

    not_drawn: tuple[str, ...]
    probe: Probe
    #: Why :attr:`not_drawn` are not, in words that fit the collective (``""``: all are drawn).
    not_drawn_why: str = ""


def check_gather(
    gather: str | Callable,
    *,
    ragged: bool = default("ragged"),
    dims: str | int = default("dims"),
    scatter_dim: str | int | None = default("scatter_dim"),
    gather_dim: str | int | None = default("gather_dim"),
    ndims: tuple[int, int] | None = default("ndims"),
    grad: str = default("grad"),
    dtypes: str | Sequence[str] = default("dtypes"),
    world_sizes: tuple[int, int] | None = default("world_sizes"),
    max_examples: int | None = default("max_examples"),
    seed: int | None = default("seed"),
    timeout: float = default("timeout"),
    probe_misuse: bool = default("probe_misuse"),
    backend: str = default("backend"),
    device: str = default("device"),
    repro_dir: str = default("repro_dir"),
    output: str = default("output"),
    groups: bool = default("groups"),
    bits: bool = default("bits"),
    compile: bool = default("compile"),
    kwargs: Mapping[str, object] | None = None,
    full_stacks: bool = default("full_stacks"),
    profile: str | None = default("profile"),
    collective: str = default("collective"),
    op: str = default("op"),
    src: int = default("src"),
    src_rank: str = default("src_rank"),
    dst: int = default("dst"),
) -> CheckReport:
    """Search for a counterexample to ``gather`` meeting its contract; raise ``AssertionError`` on one.

    ``gather`` is ``"package.module:attr"``, ``"path/to/file.py:attr"`` or a module-level callable
    (a script's own functions are found by its path: guard its top level with
    ``if __name__ == "__main__"``).  The keywords are ``check``'s options
    (``python -m harness check --help``), with Python values: ``dims`` ``"any"`` or an int,
    ``dtypes`` a comma list or a sequence, ``world_sizes`` and ``ndims`` ``(low, high)`` pairs,
    ``kwargs`` a mapping of Python literals passed on every call (``{"sync_grads": True}``).
    ``profile`` ``None`` is the project's default profile; the caller's global Hypothesis
    settings are left alone.  Bad arguments raise :class:`~harness.core.errors.UsageError`, a
    target that cannot be imported :class:`~harness.core.errors.TargetError`, one that no calling
    convention fits :class:`~harness.core.errors.Misfit`.
    """
    __tracebackhide__ = True  # a failure shows the counterexample, not this function's source
    given = dict(locals())
    options = bind({name: value for name, value in given.items() if name != "gather"}, target_of(gather))
    pool = shared_pool()
    report = execute(options, pool, prepare(options, pool))
    warn_unattributed(report)
    if report.verdict == "fail":  # its notes are in its text: not told again as warnings
        rerun = rerun_commands(options)
        raise check_failed(failure_text(report, full_stacks=options.full_stacks, rerun=rerun),
                           failure_summary(report, full_stacks=options.full_stacks, rerun=rerun[-1]))
    for note in note_warnings(report):
        warnings.warn(note, stacklevel=_first_frame_outside_harness())
    return report


def _first_frame_outside_harness() -> int:
    """The ``stacklevel`` that attributes a warning issued by this function's caller to the first
    frame outside the harness: the user's test, also through the pytest plugin's fixture."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and engine_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level



def note_warnings(report: CheckReport) -> list[GatherNote]:
    """Each of the report's notes that asks something of the user as a :class:`GatherNote`
    warning to issue; how the target is called (:attr:`CheckReport.call_notes`) asks nothing."""
    return [GatherNote(f"gather-harness: {note}") for note in report.notes if note not in report.call_notes]


def rerun_commands(options: CheckOptions) -> list[str]:
    """The commands that run this check again: the pytest test it runs in (if any), then the CLI's."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    commands = []
    if current:
        seed = [] if options.seed is None else ["--gather-seed", str(options.seed)]
        commands.append(shlex.join(["pytest", current.rpartition(" ")[0] or current, *seed]))
    return [*commands, check_command(options)]


def check_command(options: CheckOptions, **command_options: Any) -> str:
    """``python -m harness check ...``: the same check from the command line (same contract, budget,
    seed); ``command_options``: the :data:`~harness.settings.options.COMMAND_OPTIONS` it ran with."""
    values = {**options.option_values(), **command_options}
    return rerun_line("check", values, options.seed or 0, shown_target(options.target))


def warn_unattributed(report: CheckReport) -> None:
    """A Python warning (:class:`~harness.search.finding.UnreproducedFaultWarning`) per hang or crash that
    no replay reproduced: the check passes, and pytest lists these in its warnings summary."""
    for line in report.warnings():
        warnings.warn(line, UnreproducedFaultWarning, stacklevel=_first_frame_outside_harness())


def target_of(gather: str | Callable) -> str:
    """The ``module:attr`` selector of ``gather``, so that a rank can import it by name.

    A string is checked as far as it can be without importing it (:func:`harness.ranks.targets.locate`),
    a file path made absolute (warm ranks keep the directory they started in).  A callable must be
    reachable from its module by its qualified name: no lambda, closure, partial or bound method.
    """
    if isinstance(gather, str):
        return targets.locate(gather)
    if not callable(gather):
        raise UsageError(f"gather={gather!r} is neither a target string like 'package.module:attr' nor a callable")
    module_name = getattr(gather, "__module__", None)
    qualname = getattr(gather, "__qualname__", None)
    if not module_name or not qualname or "<" in qualname:
        raise UsageError(
            f"gather={gather!r}: ranks import the gather by name, so it must be a module-level function "
            f"(not a lambda, closure, partial or local function); define it at module level or pass 'module:attr'"
        )
    module = sys.modules.get(module_name)
    found: object = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not gather:
        raise UsageError(f"gather={gather!r}: {module_name}.{qualname} does not name this object; "
                         f"pass a module-level function or a 'module:attr' string")
    if module_name == "__main__":
        path = getattr(module, "__file__", None)
        if path is None:
            raise UsageError(f"gather={gather!r} is defined in an interactive session; ranks cannot import it: "
                             f"put it in a file and pass 'path/to/file.py:{qualname}'")
        return f"{os.path.abspath(path)}:{qualname}"
    return f"{module_name}:{qualname}"


def bind(values: Mapping[str, Any], target: str, *, listen: bool = False, command: str = "check",
         prefix: str = "--") -> CheckOptions:
    """The check of ``target`` (:func:`target_of`) that option values describe: every front end's
    one way from its options to a :class:`CheckOptions`.

    ``values`` maps :data:`~harness.settings.options.OPTIONS` names to text or Python values
    (:func:`~harness.settings.options.resolved`); a missing or ``None`` one is ``command``'s
    default.  Raises :class:`UsageError` naming the option as ``prefix`` spells it.
    """
    settings = resolved(values, command, prefix)
    return CheckOptions(target=target, contract=bind_contract(settings, listen=listen), dtype_text=settings["dtypes"],
                        max_examples=settings["max_examples"], duration_s=settings["duration"], seed=settings["seed"],
                        timeout=settings["timeout"], probe_misuse=settings["probe_misuse"],
                        repro_dir=settings["repro_dir"], profile=settings["profile"],
                        full_stacks=settings["full_stacks"])


def bind_contract(settings: Mapping[str, Any], *, listen: bool = False) -> Contract:
    """The contract of :func:`~harness.settings.options.resolved` ``settings``, checked against each
    other and against this machine (:func:`~harness.pool.machine.check_machine`); without world
    sizes, the profile's range, capped for nccl at the GPUs here.  ``listen``: ranks torchrun
    started elsewhere, one world size (the job's), no local checks.
    """
    profile = settings["profile"] or profile_names.default_name()
    world_sizes = settings["world_sizes"] or within_gpus(profile_names.WORLD_SIZES[profile], settings["backend"])
    if listen and world_sizes[0] != world_sizes[1]:
        raise UsageError("--world-sizes {}-{}: with --listen the world size is the torchrun job's; give it as "
                         "--world-sizes W (nnodes x nproc-per-node)".format(*world_sizes))
    contract = contract_of(settings, world_sizes)
    check_machine(settings["backend"], settings["device"], world_sizes, local=not listen)
    return contract


def remote_pool(listen: str, contract: Contract, *, timeout: float, connect_timeout: float,
                address_file: str | None) -> Pool:
    """The ranks of a torchrun job (``--listen``), serving cases of ``contract``."""
    from harness.pool.remote_driver import RemotePool

    return RemotePool(listen, backend=contract.backend, device=contract.device,
                      world_size=contract.world_sizes[0], timeout=timeout, connect_timeout=connect_timeout,
                      address_file=address_file)


def prepare(options: CheckOptions, pool: Pool) -> Prepared:
    """Measure the backend, then probe the target's calling convention on real ranks; a dtype
    named in ``--dtypes`` that the backend cannot move is a :class:`UsageError`."""
    refuse_unfit_signature(options.target, options.contract)  # before any rank starts
    backend, device = options.contract.backend, options.contract.device
    caps = capabilities.measure(pool, backend, device)
    missing = tuple(name for name in options.contract.dtypes if not caps.supports(name))
    named = {part.strip() for part in options.dtype_text.split(",")} - set(DTYPE_GROUPS)
    refused = [name for name in missing if name in named]
    if refused:
        raise UsageError(
            f"--dtypes {','.join(refused)}: {backend}/{device} cannot all_gather {', '.join(refused)} in torch "
            f"{torch.__version__} (it can: {', '.join(caps.gather_dtypes())}); drop it, or use a group such as all"
        )
    dtype = simplest_first(caps.drawable(options.contract.dtypes))[0]
    found = probe(pool, options.target, options.contract, dtype, timeout_s=options.timeout)
    note = hints.differentiable_note(pool, options.target, found, dtype, options.timeout) if options.annotate else ""
    found.advice += [note] if note else []
    return Prepared(missing, found, caps.refusal(missing, options.contract.collective) if missing else "")


def execute(options: CheckOptions, pool: Pool, prepared: Prepared,
            on_example: Callable[[Progress], None] | None = None) -> CheckReport:
    """Run the search; unless told not to (``annotate``), give every finding its hints and its
    repro scripts (``repro``, ``minimal_repro``)."""
    report = run_check(options.target, options.contract, options.search_settings(), pool=pool, on_example=on_example,
                       probed=prepared.probe)
    if options.annotate:
        annotate(report, options, pool)
    return report


def annotate(report: CheckReport, options: CheckOptions, pool: Pool) -> None:
    """What the target does de facto, every finding's hints and its two repro scripts."""
    note = hints.de_facto_note(report)
    report.notes += [note] if note else []
    for finding in report.findings:
        finding.hints += [hint for hint in (hints.layout_hint(finding), hints.ragged_hint(
            pool, options.target, report.contract, finding, options.timeout)) if hint]
    for misuse, findings in ((False, report.findings), (True, report.misuse_findings)):
        for finding in findings:
            faithful = repro.write(finding, report.target, options.repro_dir, timeout_s=options.timeout,
                                   misuse=misuse)
            finding.repro = str(faithful)
            finding.minimal_repro = str(minimal_repro.write(finding, repro.absolute_target(report.target), faithful,
                                                            timeout_s=options.timeout, misuse=misuse))


def profile_settings(name: str | None) -> settings:
    """The settings of Hypothesis profile ``name`` (default: the project's), without loading it:
    a library must not change the caller's global profile."""
    return profiles.settings_for(name or profiles.default_name())


__all__ = ["CheckOptions", "DEFAULT_REPRO_DIR", "GatherNote", "Prepared", "bind", "bind_contract",
           "check_command", "check_gather", "execute", "prepare",
           "note_warnings", "profile_settings", "remote_pool", "rerun_commands", "target_of", "warn_unattributed"]
