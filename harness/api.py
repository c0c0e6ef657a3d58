"""The Python API, and the steps every front end shares (CLI ``check``, pytest plugin, report).

Use it from another project's test suite::

    from harness import check_gather

    def test_my_gather():
        check_gather("mypkg.dist:gather", ragged=True, grad="sum")   # or pass the function

``check_gather`` returns the :class:`~harness.search.CheckReport` when no counterexample was
found and raises ``AssertionError`` whose text is the counterexample otherwise: the property
violated, the minimal case, what each rank got versus the reference, and the path of a
standalone repro script.  A hang or crash that no replay reproduced is not a counterexample:
it comes as a :class:`~harness.finding.UnreproducedFaultWarning`.  When the harness itself
cannot run (ranks that will not start, its capability probe failing twice) it raises
:class:`~harness.pool.PoolError`, never ``AssertionError``.  The target is always imported by a rank process, never by the
caller's process, so a gather that hangs or aborts cannot take the test run down with it.

A check goes through the same three steps from every front end, so they cannot drift apart:
:func:`build_contract` (options -> contract; nothing started yet), :func:`prepare` (the
backend's dtype support is measured, ranks import the target and the probe decides its calling
convention) and :func:`execute` (the search, then one repro script per finding).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from hypothesis import settings

from harness import capabilities, files, profiles, repro
from harness.contract import DTYPE_GROUPS, Contract, UsageError, parse_dtypes
from harness.finding import Finding, UnreproducedFaultWarning
from harness.pool import RankSets, local_world_size_limit, shared_pool, too_many_ranks
from harness.probe import Probe, probe
from harness.search import CheckReport, Progress, run_check
from harness.strategies import simplest_first
from harness.targets import split_target

DEFAULT_REPRO_DIR = files.default_path("repros")


@dataclass(frozen=True)
class CheckOptions:
    """One check as its user asked for it: the target, its claimed contract, the search budget.

    ``dtype_text`` is the ``--dtypes`` text as written: a dtype the backend cannot gather is
    silently skipped when it came from a group (``all``, ``int``, ...) and an error when it
    was named explicitly.  ``profile`` is a Hypothesis profile name (``None``: the default).
    """

    target: str
    contract: Contract
    dtype_text: str = "all"
    max_examples: int | None = None
    duration_s: float | None = None
    seed: int | None = None
    timeout: float = 10.0
    probe_misuse: bool = False
    repro_dir: str = DEFAULT_REPRO_DIR
    profile: str | None = None
    bits: bool = True


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` learned before the search: the dtypes not drawn, and the probe's
    verdict (the calling convention, the contract it implies, or the probe case that failed)."""

    not_drawn: tuple[str, ...]
    probe: Probe


def check_gather(
    gather: str | Callable,
    *,
    ragged: bool = True,
    dims: str | int = "any",
    grad: str = "none",
    dtypes: str | Sequence[str] = "all",
    world_sizes: tuple[int, int] = (1, 4),
    max_examples: int | None = None,
    seed: int | None = None,
    timeout: float = 10.0,
    probe_misuse: bool = False,
    backend: str = "gloo",
    device: str = "cpu",
    repro_dir: str = DEFAULT_REPRO_DIR,
    output: str = "auto",
    groups: bool = False,
    bits: bool = True,
) -> CheckReport:
    """Search for a counterexample to ``gather`` meeting its contract; raise ``AssertionError`` on one.

    - ``gather``: ``"package.module:attr"``, ``"path/to/file.py:attr"``, or a module-level
      callable (its ``module:qualname`` is derived; a script's own functions are found by
      file path, so guard the script's top level with ``if __name__ == "__main__"``).
    - ``ragged``, ``dims`` (``"0"`` or ``"any"``), ``grad`` (``none``/``local``/``sum``/``mean``),
      ``dtypes`` (``"all"``, a comma list, or a sequence of names and groups),
      ``world_sizes`` (low, high), ``backend``, ``device``: the contract, as in ``check``.
    - ``output`` (``auto``, ``tensor``, ``list``, ``stack``, ``first``): how the result reads;
      ``auto`` lets the probe detect it.  ``groups``: also draw subgroup layouts and pass
      ``group=``.  ``bits`` (default True): check raw-byte identity on top of value equality.
    - ``max_examples`` (default: the Hypothesis profile's), ``seed``, ``timeout`` (seconds per
      case), ``probe_misuse``: as in ``check``.
    - ``repro_dir`` (default ``.gather-harness/repros``): where repro scripts of failures are written,
      one folder per target, one script per property (a newer one replaces the older).

    The Hypothesis profile is the project's default one (``GATHER_HARNESS_PROFILE``, else
    ``ci`` under ``CI``, else ``dev``); the caller's global Hypothesis settings are left alone.
    Bad arguments raise :class:`~harness.contract.UsageError`, a target that cannot be
    imported :class:`~harness.targets.TargetError`, one that no calling convention fits
    :class:`~harness.conventions.Misfit`.
    """
    dtype_text = dtypes if isinstance(dtypes, str) else ",".join(dtypes)
    options = CheckOptions(
        target=target_of(gather),
        contract=build_contract(ragged=ragged, dims=str(dims), grad=grad, dtype_text=dtype_text, backend=backend,
                                device=device, world_sizes=(world_sizes[0], world_sizes[1]), output=output,
                                groups=groups),
        dtype_text=dtype_text,
        max_examples=max_examples,
        seed=seed,
        timeout=timeout,
        probe_misuse=probe_misuse,
        repro_dir=repro_dir,
        bits=bits,
    )
    pool = shared_pool(timeout)
    report = execute(options, pool, prepare(options, pool))
    warn_unattributed(report)
    if report.verdict == "fail":
        raise AssertionError(failure_text(report))
    return report


def warn_unattributed(report: CheckReport) -> None:
    """A Python warning (:class:`~harness.finding.UnreproducedFaultWarning`) per hang or crash that
    no replay reproduced: the check passes, and pytest lists these in its warnings summary."""
    for line in report.warnings():
        warnings.warn(line, UnreproducedFaultWarning, stacklevel=3)


def target_of(gather: str | Callable) -> str:
    """The ``module:attr`` selector of ``gather``, so that a rank can import it by name.

    A string is checked for the selector syntax only, and a file path in it made absolute:
    warm ranks keep the working directory they started in.  A callable must be reachable
    from its module by its qualified name: lambdas, closures and functions defined inside
    other functions are not, and neither are partials or bound methods of instances.
    """
    if isinstance(gather, str):
        split_target(gather)
        return repro.absolute_target(gather)
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


def build_contract(
    *, ragged: bool, dims: str, grad: str, dtype_text: str, backend: str, device: str, world_sizes: tuple[int, int],
    output: str = "auto", groups: bool = False,
) -> Contract:
    """The contract the options describe, checked against each other and against this machine.

    Raises :class:`UsageError` naming the option: unknown names, a range outside 1..64 or
    past what this machine holds in local ranks, nccl on CPU tensors, CUDA without a CUDA
    device, more nccl ranks than GPUs.
    """
    contract = Contract(ragged=ragged, dims=dims, dtypes=parse_dtypes(dtype_text), grad=grad,
                        backends=(backend,), devices=(device,), world_sizes=world_sizes, output=output, groups=groups)
    _check_machine(backend, device, world_sizes)
    return contract


def _check_machine(backend: str, device: str, world_sizes: tuple[int, int]) -> None:
    limit = local_world_size_limit()
    if world_sizes[1] > limit:
        raise UsageError(f"--world-sizes {world_sizes[0]}-{world_sizes[1]}: {too_many_ranks(world_sizes[1], limit)}")
    if backend == "nccl" and device != "cuda":
        raise UsageError("--backend nccl: nccl moves CUDA tensors only; add --device cuda, or use --backend gloo")
    if device != "cuda":
        return
    count = torch.cuda.device_count()
    if count == 0:
        raise UsageError(f"--device cuda: no CUDA device is visible to torch {torch.__version__} "
                         "(torch.cuda.device_count() == 0); use --backend gloo --device cpu")
    low, high = world_sizes
    if backend == "nccl" and high > count:
        raise UsageError(f"--world-sizes {low}-{high}: nccl needs one GPU per rank and torch sees {count}; "
                         f"use --world-sizes {min(low, count)}-{count}")


def prepare(options: CheckOptions, pool: RankSets) -> Prepared:
    """Measure the backend, then probe the target's calling convention on real ranks.

    Raises :class:`~harness.targets.TargetError` when the target cannot be loaded,
    :class:`~harness.conventions.Misfit` when no calling convention fits it, and
    :class:`UsageError` when an explicitly named dtype is one the backend cannot gather.
    """
    backend, device = options.contract.backends[0], options.contract.devices[0]
    caps = capabilities.measure(pool, backend, device)
    missing = tuple(name for name in options.contract.dtypes if not caps.supports(name))
    named = {part.strip() for part in options.dtype_text.split(",")} - set(DTYPE_GROUPS)
    refused = [name for name in missing if name in named]
    if refused:
        raise UsageError(
            f"--dtypes {','.join(refused)}: {backend}/{device} cannot all_gather {', '.join(refused)} in torch "
            f"{torch.__version__} (it can: {', '.join(caps.gather_dtypes())}); drop it, or use a group such as all"
        )
    drawn = tuple(name for name in options.contract.dtypes if name not in missing)
    if not drawn:
        raise UsageError(f"--dtypes: none of {', '.join(options.contract.dtypes)} is supported by {backend}/{device} "
                         f"(supported: {', '.join(caps.gather_dtypes())})")
    found = probe(pool, options.target, options.contract, simplest_first(drawn)[0], timeout=options.timeout)
    return Prepared(missing, found)


def execute(options: CheckOptions, pool: RankSets, prepared: Prepared,
            on_example: Callable[[Progress], None] | None = None) -> CheckReport:
    """Run the search, then write a repro script for every finding (its path lands in ``repro``)."""
    report = run_check(
        options.target,
        options.contract,
        max_examples=options.max_examples,
        duration_s=options.duration_s,
        seed=options.seed,
        timeout=options.timeout,
        probe_misuse=options.probe_misuse,
        pool=pool,
        on_example=on_example,
        base_settings=profile_settings(options.profile),
        bits=options.bits,
        probed=prepared.probe,
    )
    for out_of_contract, findings in ((False, report.findings), (True, report.misuse_findings)):
        for finding in findings:
            finding.repro = str(repro.write(finding, report.target, options.repro_dir, timeout=options.timeout,
                                            out_of_contract=out_of_contract))
    return report


def profile_settings(name: str | None) -> settings:
    """The settings of Hypothesis profile ``name`` (default: the project default), without loading it.

    Never the caller's global profile: a library must not change it, and Hypothesis' own
    default has a 200 ms deadline that real multi-process examples would trip at random.
    """
    return profiles.settings_for(name or profiles.default_name())


def failure_text(report: CheckReport) -> str:
    """Every finding's counterexample text with its repro script."""
    return "\n\n".join(finding_text(finding) for finding in report.findings + report.misuse_findings)


def finding_text(finding: Finding) -> str:
    """The property, the minimal case, what each rank got versus the reference, and the repro."""
    run = f"python {finding.repro}   or: torchrun --standalone --nproc-per-node {finding.case.world_size} {finding.repro}"
    return f"{finding.text()}\nrepro: {finding.repro}\n  run: {run}"


__all__ = ["CheckOptions", "DEFAULT_REPRO_DIR", "Prepared", "build_contract", "check_gather", "execute",
           "failure_text", "finding_text", "prepare", "profile_settings", "target_of", "warn_unattributed"]
