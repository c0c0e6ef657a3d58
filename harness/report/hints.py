"""One-line hints: what a user most likely has to change, said when the ranks have shown it.

A failure says what broke; a hint says what to do about it, and only when a run on the
ranks backs it up, never as a guess:

- :func:`differentiable_note`: a target checked with ``--grad none`` whose result carries
  gradients (an ``autograd.Function``, or a result that requires grad when its input does)
  gets no gradient check at all: the note says so, and which option gives one;
- :func:`ragged_hint`: a hang, crash or desync on ragged input whose case passes once every
  rank holds the same length: ``--no-ragged`` is the contract of code that needs equal sizes,
  and the hint says what that contract would no longer check.  A target that takes split
  sizes claims ragged input by its signature: it gets no such hint;
- :func:`layout_hint`: a failure that needs ranks' memory layouts to differ, in plain words;
- :func:`de_facto_note`: the gradient contract every case with gradients matched, pass or fail,
  and the stronger contract a contrastive loss needs when the target delivers only ``local``.
"""

from __future__ import annotations

import dataclasses

from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome
from harness.core.contract import DIFFERENTIABLE_DTYPES, UNGRADED_OPS, Contract
from harness.core.conventions import SPLIT_ROLES
from harness.core.procedure import RunRequest
from harness.pool.pool import Pool
from harness.search import probe
from harness.search.confirm import FAULTS
from harness.search.finding import Finding
from harness.search.results import CheckReport

DIFFERENTIABLE = "the target is differentiable ({why}) but --grad none checks no gradient: add {which}"
#: The gradient contracts the note offers: a gather's three, an all-reduce's three, the others' adjoint.
OFFERED_GATHER = "--grad sum (or local, mean; grad=\"sum\" from Python)"
OFFERED_NEIGHBOUR = "--grad adjoint (grad=\"adjoint\" from Python: the reverse collective of the cotangents)"
OFFERED_ALL_REDUCE = "--grad sum (or identity, mean; grad=\"sum\" from Python)"
OFFERED_COPY = "--grad sum (grad=\"sum\" from Python: the all-reduce of the cotangents)"


def differentiable_note(pool: Pool, target: str, probed: probe.Probe, dtype: str, timeout_s: float) -> str:
    """The note for a differentiable target checked without a gradient contract, or ``""``.

    An ``autograd.Function`` is differentiable by construction; any other target is called
    once, on the probe's smallest case with an input that requires grad (no backward pass).
    """
    contract, convention = probed.contract, probed.convention
    if (contract.grad != "none" or probed.failed is not None or dtype not in DIFFERENTIABLE_DTYPES
            or contract.op in UNGRADED_OPS and contract.kind.reduces):
        return ""  # a max, min, product or bitwise reduction has no gradient contract to offer
    which = {"gather": OFFERED_GATHER, "all-reduce": OFFERED_ALL_REDUCE,
             "copy": OFFERED_COPY}.get(contract.collective, OFFERED_NEIGHBOUR)
    if convention.call.apply:
        return DIFFERENTIABLE.format(why="an autograd.Function", which=which)
    case = probe.probe_case(contract, contract.world_sizes[0], dtype, convention.output,
                            passes_group=bool(contract.groups))
    request = RunRequest(case=case, target=target, call=convention.call, detect=True, declared=convention.output,
                         requires_grad=True)
    outcome = pool.run_request(request, timeout_s)
    pool.forget_state(case)
    results = [res for res in outcome.results if res is not None and not res.idle]
    if outcome.fault or outcome.errors or not results or not all(res.output_requires_grad for res in results):
        return ""
    if any(res.in_place for res in results):  # its result is x itself, which requires grad whatever the target does
        return ""
    return DIFFERENTIABLE.format(why="its result requires grad when its input does", which=which)


def ragged_hint(pool: Pool, target: str, contract: Contract, finding: Finding, timeout_s: float) -> str:
    """``--no-ragged``, when a fault on ragged input goes away with equal lengths on every rank, and
    what it would hide; never for a target told the sizes (a split-size parameter): it claims them."""
    case = finding.case
    told_sizes = any(role in SPLIT_ROLES for role in finding.call.roles)
    if not contract.ragged or finding.kind not in FAULTS or not case.is_ragged or told_sizes:
        return ""
    equal = equal_lengths(case)
    pool.fresh(equal)
    outcome = pool.run(equal, target, call=finding.call, repeat=finding.repeat, timeout=timeout_s)
    if check_outcome(outcome, bits=finding.bits):
        if not outcome.fault:
            pool.forget_state(equal)
        return ""
    if case.collective == "all-to-all":
        held = f"sends {equal.ranks[0].splits[0]} rows to every rank"
    else:
        held = f"holds {equal.lengths[0]} along dim {case.dim}"
    return (f"the same case passes when every rank {held}; --no-ragged (ragged=False from Python) would check only "
            f"equal sizes and no longer this failure: it is the right contract only if the code documents that the "
            f"{contract.collective} needs equal sizes on every rank")


def equal_lengths(case: Case) -> Case:
    """``case`` with every rank's length along the gather dim set to the longest one's; in an
    all-to-all, every split set to the largest one's."""
    d = case.dim % case.ndim
    if case.collective == "all-to-all":
        largest = max((n for spec in case.ranks for n in spec.splits), default=0)

        def split_evenly(spec: RankSpec) -> RankSpec:
            if not spec.splits:
                return spec
            splits = (largest,) * len(spec.splits)
            return dataclasses.replace(spec, splits=splits, shape=tuple(
                sum(splits) if k == d else n for k, n in enumerate(spec.shape)))

        return dataclasses.replace(case, ranks=tuple(split_evenly(spec) for spec in case.ranks))
    longest = max(case.lengths)

    def evened(spec: RankSpec) -> RankSpec:
        return dataclasses.replace(spec, shape=tuple(longest if k == d else n for k, n in enumerate(spec.shape)))

    return dataclasses.replace(case, ranks=tuple(evened(spec) for spec in case.ranks))


def layout_hint(finding: Finding) -> str:
    """The layout condition of ``finding`` (:func:`harness.search.confirm.layout_condition`) in plain words."""
    case = finding.case
    active = [r for r in range(case.world_size) if not case.idle(r)]
    if "cotangent layouts differ" in finding.condition:
        layouts = ", ".join(f"rank {r}: {case.ranks[r].cotangent_layout}" for r in active)
        return (f"in plain words: the gradient arriving in the backward (grad_output) is laid out differently in "
                f"memory on different ranks ({layouts}); a collective given that tensor, or its .clone() (which "
                f"keeps the layout), pairs up elements by their place in memory, not by index: call .contiguous() "
                f"on it before the collective")
    if "input layouts differ" in finding.condition:
        layouts = ", ".join(f"rank {r}: {case.ranks[r].layout}" for r in active)
        what = "gather" if case.collective == "gather" else "collective"
        return (f"in plain words: the {what}'s input is laid out differently in memory on different ranks "
                f"({layouts}); a collective given it, or its .clone() (which keeps the layout), pairs up elements "
                f"by their place in memory, not by index: call .contiguous() on it first")
    return ""


def de_facto_note(report: CheckReport) -> str:
    """What the gradients were, de facto, over every case that had them (:meth:`CheckReport.de_facto_semantics`):
    beside a failure, and on a pass only where it falls short of a contract the user may need.

    A check of ``--grad local`` whose gradients are never the sum passes, and is still the wrong
    contract for a loss computed on every rank from the gathered batch: the note says so, unless
    the target takes a group, as the tensor- and sequence-parallel gathers of activations do,
    whose ``local`` backward is their design.
    """
    semantics = report.de_facto_semantics()
    if report.contract.grad == "none" or semantics == "n/a":
        return ""
    met = semantics.split("=")
    parallel = report.convention is not None and report.convention.call.takes_group
    short_of_sum = (report.contract.grad == "local" and "sum" not in met and report.contract.collective == "gather"
                    and not parallel)
    if report.verdict == "pass" and not short_of_sum:
        return ""
    note = (f"de facto gradient: {semantics} (what the gradients matched in all {report.graded_cases} case(s) that "
            f"returned them{'; no case told these apart' if len(met) > 1 else ''})")
    if short_of_sum:
        note += ("; if every rank's loss uses the gathered batch (a contrastive loss), the contract you need is "
                 "--grad sum, which this target does not deliver")
    return note
