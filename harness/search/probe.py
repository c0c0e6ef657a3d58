"""The calling-convention probe: a few cheap calls on real ranks, before any Hypothesis example.

A rank plans the call from the target's signature (:func:`~harness.ranks.rank_calls.plan_call_on_rank`);
then the smallest in-contract cases (W=1, and the smallest W >= 2) run once each in ``detect``
mode, and the result's structure names the output convention.  The outcome is a
:class:`Convention` and the contract it implies (a target that takes no dim: the one dim its
results show); or :class:`~harness.core.errors.Misfit`, a usage error naming what came back and
the option that would fit; or the failing :class:`~harness.pool.faults.Outcome`, which the search
shrinks -- unless the call carried an argument the harness inferred
(:attr:`~harness.core.conventions.Call.inferred`): a failure that may be the harness's guess is a
:class:`~harness.core.errors.Misfit` naming it.  An optional group parameter is probed both ways.

One concern: deciding, before the search, how the target is called, along which dim, and what it returns.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import torch

from harness.core.binding import plan_signature
from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome, expected_pieces
from harness.core.compare import exact_value
from harness.core.contract import COLLECTIVES, DIFFERENTIABLE_DTYPES, Contract
from harness.core.conventions import GATHER_DIM_NAMES, ROLE_NAMES, SPLIT_ROLES, Call
from harness.core.errors import Misfit, RankCallFailed, TargetError, UsageError
from harness.core.outputs import OUTPUTS
from harness.core.procedure import RankResult
from harness.pool.faults import Outcome
from harness.pool.pool import Pool
from harness.ranks import rank_calls, targets

#: How long a rank may take to import the target: real projects import a lot on top of torch.
IMPORT_TIMEOUT_S = 60.0
#: What the ranks run to import the target and plan its call.
PLAN_TARGET = rank_calls.address(rank_calls.plan_call_on_rank)
#: The probe's input on every rank: 1-d, the same length everywhere (in every contract), and
#: a length no W-long sizes tensor has at the probe's world sizes (1 and 2), so a ``(gathered,
#: sizes)`` pair never looks like a list of per-rank pieces.
PROBE_SHAPE = (3,)


@dataclass(frozen=True)
class Convention:
    """How the harness calls a target and reads its result, and how that was decided."""

    call: Call
    output: str
    detected: bool
    #: Every call the search makes (:meth:`~harness.core.conventions.Call.forms`).
    forms: tuple[str, ...] = ()

    def describe(self) -> str:
        """E.g. ``gather(x, dim) -> list (detected)``, or ``G.apply(x, group) and G.apply(x) -> stack (detected)``."""
        calls = " and ".join(self.forms or (self.call.describe(),))
        return f"{calls} -> {self.output} ({'detected' if self.detected else 'declared'})"


@dataclass
class Probe:
    """What the probe found: the convention and the contract it implies, or the probe case that failed."""

    contract: Contract
    convention: Convention
    #: How the target is called (an optional group, a dim by position, a narrowed contract).
    notes: list[str]
    failed: Outcome | None = None
    #: What the user may want to change, learnt around the probe (a differentiable target checked
    #: without gradients): unlike :attr:`notes`, pytest issues these as warnings.
    advice: list[str] = field(default_factory=list)


def plan(pool: Pool, target: str, contract: Contract) -> Call:
    """How to call ``target``, read from its signature on ranks (the driver never imports it).

    Every rank of the smallest world the contract allows imports the target: they are the
    ranks the probe cases run on next.
    """
    results = _import_on_ranks(pool, target, contract)
    result = next((res for res in results if res.error), results[0])
    if result.error:
        reason = result.error_line().partition(": ")[2]
        if result.error_type == "Misfit":
            raise Misfit(f"target {target!r}: {reason}")
        if result.error_type == "TargetError":
            raise TargetError(reason)
        raise TargetError(f"target {target!r}: importing it raised {result.error_type}; a target must import cleanly")
    return Call.from_dict(result.value)


def refuse_unfit_signature(target: str, contract: Contract) -> None:
    """:class:`Misfit` for a signature no calling convention fits, read off the target's source
    before any rank starts (:func:`~harness.ranks.targets.static_signature`), as :func:`plan` would
    raise it; a signature that cannot be read so exactly is left to :func:`plan`."""
    signature = targets.static_signature(target)
    if signature is None:
        return
    try:
        plan_signature(targets.split_target(target)[1], signature, needs_group=bool(contract.groups),
                       kwargs=contract.kwargs, roles=contract.kind.roles)
    except Misfit as misfit:
        raise Misfit(f"target {target!r}: {misfit}") from None


def _import_on_ranks(pool: Pool, target: str, contract: Contract) -> list[RankResult]:
    """Every rank's plan; a rank that died importing the target gets a second chance on fresh
    ranks (a crowded machine can kill one), then it is the target's doing; one still importing
    after :data:`IMPORT_TIMEOUT_S` gets none."""
    try:
        return _plan_on_every_rank(pool, target, contract)
    except RankCallFailed as failed:
        if not failed.died:
            raise _no_answer(target, failed, "") from None
    try:
        return _plan_on_every_rank(pool, target, contract)
    except RankCallFailed as failed:
        raise _no_answer(target, failed, ", the second time on fresh ranks") from None


def _plan_on_every_rank(pool: Pool, target: str, contract: Contract) -> list[RankResult]:
    return pool.call(contract.world_sizes[0], PLAN_TARGET, target, bool(contract.groups),
                     contract.kwargs, contract.kind.roles, backend=contract.backend, device=contract.device,
                     timeout=IMPORT_TIMEOUT_S)


def _no_answer(target: str, failed: RankCallFailed, when: str) -> TargetError:
    return TargetError(f"target {target!r}: a rank importing it gave no answer{when} ({failed.ranks}); a target "
                       f"must import within {IMPORT_TIMEOUT_S:.0f} s, without ending the process")


def probe(pool: Pool, target: str, contract: Contract, dtype: str, *, timeout_s: float) -> Probe:
    """Plan the call, then run the probe cases; see the module docstring.  The probe's calls are no
    case's history: the search starts from a fresh module on every set the probe ran on (once, at
    the end: a compiled target compiles again after each fresh start)."""
    call = replace(plan(pool, target, contract), compiled=contract.compile)
    if contract.src_rank == "group":
        call = call.with_group_source()
    try:
        return _probe(pool, target, contract, dtype, call, timeout_s)
    finally:
        for world in probe_world_sizes(contract):
            pool.forget_state(probe_case(contract, world, dtype, "tensor"))


def _probe(pool: Pool, target: str, contract: Contract, dtype: str, call: Call, timeout_s: float) -> Probe:
    contract, relayout_notes = _relayout(call, contract, target)
    _check_split_roles(call, contract, target)
    chosen = contract.groups is not None  # --groups: an optional group is always passed, as asked
    contract = replace(contract, groups=call.takes_group if contract.groups is None else contract.groups)
    always = chosen and bool(contract.groups)
    both = call.group_optional and not always
    declared = "" if contract.output == "auto" else contract.output
    output, notes = declared or "tensor", _call_notes(call, both, bool(contract.groups), chosen) + relayout_notes
    made: dict[str, None] = {}  # the calls made so far, in order
    graded = contract.grad != "none" and dtype in DIFFERENTIABLE_DTYPES
    ran: list[Outcome] = []
    tried_the_collective = False  # the reduce-scatter hypothesis replaces ranks: test it once
    dimless = not call.takes_dim and not contract.relayout and contract.fixed_dim is None and not contract.kind.dimless
    for world in probe_world_sizes(contract):
        readings: dict[bool, str] = {}
        for passes in (True, False) if both else (bool(contract.groups),):
            case = probe_case(contract, world, dtype, output, passes_group=passes)
            made[call.describe(pass_group=case.passes_group)] = None
            outcome = pool.run(case, target, call=call, check_grad=False, repeat=False, timeout=timeout_s,
                               detect=True, declared=declared, requires_grad=graded)
            if dimless and outcome.errors and not outcome.fault:
                outcome = _on_every_dim(pool, target, call, contract, outcome, declared, graded, timeout_s)
            if not tried_the_collective and (outcome.fault or outcome.errors or _not_a_gathers_shape(outcome)):
                _check_the_collective(pool, target, call, contract, dtype, timeout_s)
                tried_the_collective = True
            if outcome.fault or outcome.errors:
                if call.inferred:
                    raise Misfit(_inferred_failure(target, call, outcome))
                return Probe(contract, Convention(call, output, not declared, tuple(made)), notes, failed=outcome)
            readings[passes] = _reading(outcome, world, target)
            ran.append(outcome)
            if any(res is not None and res.in_place for res in outcome.results) and IN_PLACE_NOTE not in notes:
                notes.append(IN_PLACE_NOTE)
            if any(res is not None and res.waited for res in outcome.results) and not call.waits:
                call = replace(call, waits=True)
                notes.append(WAITED_NOTE)
        output = _agreed(readings, call, target)
    if graded:
        _check_differentiable(ran, contract, call)
    implied = replace(contract, optional_group=both)
    if not call.takes_dim and not contract.relayout and not contract.kind.dimless:
        implied, note = _dim_of_a_dimless_target(pool, target, call, implied, dtype, output, timeout_s)
        notes.append(note)
    if OUTPUTS[output].stacked and contract.ragged:
        implied = replace(implied, ragged=False)
        notes.append("a stacked (W, ...) result needs equal shapes: only equal lengths are checked (--no-ragged)")
    if "gather_list" in call.roles and implied.ragged:
        implied = replace(implied, ragged=False)
        notes.append(f"{call.name} fills a gather_list of pieces like x, as c10d's gather takes them (one size on "
                     f"every member): only equal lengths are checked (--no-ragged)")
    return Probe(replace(implied, output=output),
                 Convention(call, output, not declared, call.forms(groups=always)), notes)


#: The inputs a target that takes no dim is tried on, each dim a different length, so that a
#: result of the right shape names the dim; three ndims, so that the dim's name is known too
#: (dim 2 of a 3-d input is -1 if the 2-d input's dim 1 and the 4-d input's dim 3 fit).
DIM_PROBE_SHAPES: tuple[tuple[int, ...], ...] = ((2, 3), (2, 3, 4), (2, 3, 4, 5))


def _dim_of_a_dimless_target(pool: Pool, target: str, call: Call, contract: Contract, dtype: str, output: str,
                             timeout_s: float) -> tuple[Contract, str]:
    """The contract with the one dim a target that takes no dim works along, and the header's note.

    Each input of :data:`DIM_PROBE_SHAPES` runs at W=2 as a case of each of its dims; the dim it
    passes (else answers with the right shapes: a buggy target still shows its dim), consistent
    over all three inputs, is the answer; none is a :class:`UsageError` naming ``--dims N``.
    """
    said = f"{call.signature} takes no dim"
    if contract.fixed_dim is not None:
        return contract, f"{said}: checked along dim {contract.dims} (--dims {contract.dims})"
    worlds = [world for world in probe_world_sizes(contract) if world >= 2]
    if not worlds:
        return replace(contract, dims="0"), f"{said}: at W=1 every dim gives the same result, so dim 0 is drawn"
    seen: dict[int, set[int]] = {}
    for shape in _dim_probe_shapes(contract):
        fits = _dims_it_fits(pool, target, call, contract, dtype, output, worlds[0], shape, timeout_s)
        if isinstance(fits, Outcome):
            raise UsageError(f"target {target!r}: {said}, and while the probe tried which dim it works along, "
                             f"{call.describe(pass_group=fits.case.passes_group)} on {fits.case.describe()} ended in a "
                             f"{fits.fault}; give the dim with --dims N "
                             f"(dims=N from Python): the search then checks that dim, faults included")
        seen[len(shape)] = fits
    if all(fits == set(range(ndim)) for ndim, fits in seen.items()):
        return replace(contract, dims="0"), (f"{said}, and its result reads the same along every dim on equal shapes: "
                                             f"dim 0 is drawn (--dims N if it works along another)")
    consistent = [dim for dim in range(-max(seen), max(seen))
                  if all(fits == ({dim % ndim} if -ndim <= dim < ndim else set()) for ndim, fits in seen.items())]
    low, high = contract.ndim_range or (1, 4)
    if not consistent or any(dim % ndim != consistent[0] % ndim for dim in consistent for ndim in range(low, high + 1)):
        tried = "; ".join(f"{ndim}-d: {', '.join(map(str, sorted(fits))) or 'none'}" for ndim, fits in seen.items())
        raise UsageError(f"target {target!r}: {said}, and the probe cannot tell which dim it works along (the dims "
                         f"whose W={worlds[0]} case it answers, by input: {tried}); give the dim with --dims N "
                         f"(dims=N from Python), and --ndims A-B if it takes inputs of some dims only")
    dim = consistent[0]  # of two names for one dim of every input drawn (--ndims 3-3: -1 and 2), the negative one
    return replace(contract, dims=str(dim)), f"{said}: it works along dim {dim} (detected; --dims N to say otherwise)"


def _dims_it_fits(pool: Pool, target: str, call: Call, contract: Contract, dtype: str, output: str, world: int,
                  shape: tuple[int, ...], timeout_s: float) -> set[int] | Outcome:
    """The dims of ``shape`` whose case the target passes, or failing that, answers with the right
    shapes; the outcome of a case that hung or crashed."""
    passed, shaped = set(), set()
    for dim in range(len(shape)):
        case = probe_case(contract, world, dtype, output, passes_group=bool(contract.groups), shape=shape, dim=dim)
        outcome = pool.run(case, target, call=call, check_grad=False, repeat=False, timeout=timeout_s)
        if outcome.fault and outcome.fault != "exception":  # a hang or crash is told once, not waited out per dim
            return outcome
        if not outcome.fault and not outcome.errors and _shapes_fit(outcome):
            shaped.add(dim)
            if not check_outcome(outcome, bits=contract.bits):
                passed.add(dim)
    return passed or shaped


def _shapes_fit(outcome: Outcome) -> bool:
    """Whether every rank's result has the reference's pieces, each of the reference's shape."""
    for res in _members(outcome):
        want = [tuple(exact_value(piece).shape) for piece in expected_pieces(outcome.case, res.rank)]
        got = [tuple(piece.shape) if isinstance(piece, torch.Tensor) else None for piece in res.output or []]
        if got != want:
            return False
    return True


def _on_every_dim(pool: Pool, target: str, call: Call, contract: Contract, raised: Outcome, declared: str,
                  graded: bool, timeout_s: float) -> Outcome:
    """The probe case again on inputs of more dims (:func:`_dim_probe_shapes`) for a target that
    takes no dim and raised on the first: its dim may be one the first input lacks.  The first
    outcome that does not fail, else the one that raised."""
    first = raised.case
    for shape in _dim_probe_shapes(contract):
        if len(shape) <= first.ndim:
            continue
        case = probe_case(contract, first.world_size, first.dtype, first.output, passes_group=first.passes_group,
                          shape=shape, dim=0)
        outcome = pool.run(case, target, call=call, check_grad=False, repeat=False, timeout=timeout_s, detect=True,
                           declared=declared, requires_grad=graded)
        if not outcome.fault and not outcome.errors:
            return outcome
    return raised


def _dim_probe_shapes(contract: Contract) -> list[tuple[int, ...]]:
    """:data:`DIM_PROBE_SHAPES` of the dims the contract draws (``--ndims``)."""
    low, high = contract.ndim_range or (1, 4)
    return [shape for shape in DIM_PROBE_SHAPES if low <= len(shape) <= high] or [(2, 3, 4, 5)[:low]]


def _members(outcome: Outcome) -> list[RankResult]:
    """The results the probe reads: every member's but a reduce's or a gather-to's others (anything goes there)."""
    return [res for res in outcome.results if res is not None and outcome.case.judged(res.rank)]


def _check_differentiable(ran: list[Outcome], contract: Contract, call: Call) -> None:
    """A gradient contract on a result that requires grad on no probe case is the contract's
    mistake, not a finding: :class:`UsageError`.  A result differentiable on some cases and not
    on others is left to the search, which reports it."""
    if any(res.output_requires_grad for outcome in ran for res in _members(outcome)):
        return
    worlds = " and ".join(f"W={world}" for world in dict.fromkeys(outcome.case.world_size for outcome in ran))
    given = {name for name, _ in contract.kwargs}
    switch = next((name for name in re.findall(r"(\w*grad\w*)(?::[^,=)]*)?=False", call.signature)
                   if name not in given), "")
    if switch:
        raise UsageError(f"--grad {contract.grad}: the result of {call.describe()} requires grad on none of the "
                         f"probe's cases ({worlds}): did you mean --kwarg {switch}=True (kwargs={{{switch!r}: True}} "
                         f"from Python)? {call.signature} switches gradients off by default; to check it as it is, "
                         f"use --grad none")
    raise UsageError(f"--grad {contract.grad}: the result of {call.describe()} requires grad on none of the probe's "
                     f"cases ({worlds}, an input that requires grad): it is not differentiable (torch.no_grad, "
                     f".detach(), a collective without autograd); check it with --grad none (grad=\"none\" from "
                     f"Python), or give it a backward")


def _not_a_gathers_shape(outcome: Outcome) -> bool:
    """Whether a probe case of two ranks or more came back as one tensor of another length than a
    gather's (only a gather's contract acts on it: :func:`_check_the_collective`)."""
    case = outcome.case
    gathered = list(case.ranks[0].shape)
    gathered[case.dim] *= case.world_size
    return case.world_size > 1 and any(res.detected_shape not in (None, tuple(gathered)) for res in _members(outcome))


#: The note for a target that returns None and leaves its result in x (``dist.all_reduce(x)``).
IN_PLACE_NOTE = ("it returns None (or a work handle alone) and leaves its result in x, as dist.all_reduce(x) does: x after the call is read "
                 "as its result (in place), and its repeat calls run on fresh inputs")


#: The note for a target that returns a work handle with its result (``async_op=True``).
WAITED_NOTE = ("it returns a work handle with its result (async_op=True), as (out, handle) or the handle alone: the "
               "handle is waited on before the result is read, as its caller must (handle.wait())")


#: What a gather's failed probe is tried as (:func:`_check_the_collective`): the collective, what it
#: gives each rank, and what else its option needs, for the message.
HYPOTHESES: tuple[tuple[str, str, str], ...] = (
    ("reduce-scatter", "each rank's slot of the sum", "; --no-ragged if it takes no split sizes"),
    ("all-reduce", "every rank the sum of their inputs", ""),
)


def _check_the_collective(pool: Pool, target: str, call: Call, contract: Contract, dtype: str,
                          timeout_s: float) -> None:
    """A gather's probe case failed or came back the wrong length: if the same call passes every probe
    case of two ranks or more as another collective of :data:`HYPOTHESES` (summing, equal shapes), the
    contract names the wrong collective, and that is :class:`UsageError` (exit 2) naming
    ``--collective``, not a finding."""
    if contract.collective != "gather":
        return
    for collective, gives, needs in HYPOTHESES:
        dims = "any" if COLLECTIVES[collective].dimless else contract.dims
        passed = _passes_as(pool, target, call, replace(contract, collective=collective, op="sum", ragged=False,
                                                        grad="none", output="tensor", dtypes=(dtype,), dims=dims),
                            timeout_s)
        if passed is not None:
            raise UsageError(f"{call.describe()} computes {'an' if collective[0] in 'aeiou' else 'a'} {collective}, "
                             f"not a gather: on the case {passed.describe()}, it returns {gives}; check it with "
                             f"--collective {collective} (collective=\"{collective}\" from Python{needs})")


def _passes_as(pool: Pool, target: str, call: Call, hypothesis: Contract, timeout_s: float) -> Case | None:
    """The first probe case of two ranks or more the call passes under ``hypothesis``, if it passes them
    all; each runs on ranks that ran nothing of it after (a hypothesis, not a case)."""
    passed = []
    for world in probe_world_sizes(hypothesis)[1:]:
        case = probe_case(hypothesis, world, hypothesis.dtypes[0], "tensor", passes_group=bool(hypothesis.groups))
        outcome = pool.run(case, target, call=call, check_grad=False, repeat=False, timeout=timeout_s)
        pool.fresh(case)
        if outcome.fault or check_outcome(outcome):
            return None
        passed.append(case)
    return passed[0] if passed else None


def _relayout(call: Call, contract: Contract, target: str) -> tuple[Contract, list[str]]:
    """The contract as the call makes it, and a note: a target taking a re-layout's two dims checks
    a re-layout (its dims drawn unless fixed); a re-layout is called with both dims or neither
    (fixed in its code, then given as --scatter-dim and --gather-dim): one bound dim is
    :class:`Misfit` (exit 2), as the other would be left to a guess."""
    if call.takes_scatter_dim:
        contract = replace(contract, scatter_dim=contract.scatter_dim or "any", gather_dim=contract.gather_dim or "any")
        return contract, [f"{call.signature} takes a re-layout's two dims: it scatters one dim and gathers the pieces "
                          f"along another; checked at {contract.describe_dims()} (any: drawn over the input's dims; "
                          f"--scatter-dim N and --gather-dim N fix them)"]
    if not contract.relayout:
        return contract, []
    if call.takes_dim:
        bound = next(parameter for parameter, role in call.positional + call.keywords if role == "dim")
        raise Misfit(f"target {target!r}: {call.signature} takes one dim{f', {bound!r}' if bound else ''}, and "
                     f"--scatter-dim/--gather-dim say a re-layout, which binds two (scatter: "
                     f"{', '.join(ROLE_NAMES['scatter_dim'])}; gather: {', '.join(GATHER_DIM_NAMES)}) or "
                     f"none (its dims fixed in its code): leave them out to check a one-dim all-to-all")
    if len(contract.fixed_dims) < 2:
        raise Misfit(f"target {target!r}: {call.signature} takes no dim, so a re-layout's dims cannot be drawn: give "
                     f"the two its code fixes, --scatter-dim N --gather-dim M")
    return contract, [f"{call.signature} takes no dim: its re-layout is checked at {contract.describe_dims()}"]


def _check_split_roles(call: Call, contract: Contract, target: str) -> None:
    """A ragged reduce-scatter or all-to-all cannot be right without its split sizes: a target
    that takes none is checked with equal splits (``--no-ragged``) or not at all (exit 2).  A
    re-layout needs none: its pieces are cut as ``torch.tensor_split`` cuts them, and the lengths
    along its gather dim are a ragged gather's, which the target exchanges."""
    if contract.relayout:
        return
    told = (*call.roles, call.split_input) + (("output_split_sizes",) if "output_list" in call.roles else ())
    missing = [role for role in contract.kind.roles if role in SPLIT_ROLES and role not in told]
    if contract.ragged and missing:
        raise Misfit(f"target {target!r}: {call.signature} takes no {' or '.join(missing)} parameter (named "
                     f"{'; '.join(', '.join(ROLE_NAMES[role]) for role in missing)}), so a ragged {contract.collective} "
                     f"cannot tell it the sizes: check equal splits with --no-ragged, or add the parameter")


def _call_notes(call: Call, both: bool, groups: bool, chosen: bool) -> list[str]:
    """What the header says about the call beyond its forms: which groups it gets, and why."""
    notes = []
    if groups:
        why = "--groups: always passed" if chosen else f"{call.name} takes a group; --no-groups: the world group only"
        notes.append(f"subgroups: cases pass group layouts (several groups, idle ranks, group rank != global rank) "
                     f"({why})")
    if both:
        passed = "a layout's group" if groups else "the world group; its case line then says group=WORLD"
        notes.append(f"the group of {call.name} is optional: each case makes one of the two calls (when passed: "
                     f"{passed})")
    elif call.takes_group and not groups:
        notes.append(f"the group of {call.name} has no default: every call gets the world group (--no-groups)")
    if call.inferred:
        notes.append(f"{call.signature} names no {' or '.join(call.inferred)} parameter: passed by position, "
                     f"inferred (had the probe's call failed, that would have been exit 2, not a finding)")
    return notes


def _inferred_failure(target: str, call: Call, outcome: Outcome) -> str:
    """The probe's call failed, and it carried an argument the harness inferred: not a finding."""
    inferred = " and ".join(call.inferred)
    wrapper = "gather" if outcome.case.collective == "gather" else "f"
    return (f"{_failed_call(target, call, outcome)}; {inferred} was inferred ({call.signature} names no such "
            f"parameter), so this is not a finding: wrap it in a function that names its arguments, e.g. "
            f"def {wrapper}(x, dim): return {call.name}(x, dim)")


def _failed_call(target: str, call: Call, outcome: Outcome) -> str:
    """The probe's failed call, in a few words: as made, on which case, the first rank's exception or the fault."""
    case, errors = outcome.case, outcome.errors
    what = f"rank {errors[0].rank} raised {errors[0].error_line()}" if errors else f"it ended in a {outcome.fault}"
    return f"target {target!r}: called as {call.describe(pass_group=case.passes_group)} on {case.describe()}, {what}"


def _agreed(readings: dict[bool, str], call: Call, target: str) -> str:
    """The one reading of both calls of an optional group; :class:`Misfit` when they differ."""
    if len(set(readings.values())) > 1:
        shown = " and as ".join(f"{readings[passed]} when called as {call.describe(pass_group=passed)}"
                                for passed in readings)
        raise Misfit(f"target {target!r}: its result reads as {shown}; declare --output to check one way, or --groups "
                     f"to always pass the group")
    return next(iter(readings.values()))


def probe_world_sizes(contract: Contract) -> list[int]:
    """The smallest world the contract allows, and the smallest one of 2 or more if that is larger."""
    low, high = contract.world_sizes
    sizes = [low]
    if low < 2 <= high:
        sizes.append(2)
    return sizes


def probe_case(contract: Contract, world: int, dtype: str, output: str, *, passes_group: bool = False,
               shape: tuple[int, ...] | None = None, dim: int | None = None) -> Case:
    """``world`` ranks holding ``shape`` of ``dtype`` each (iota), gathered along ``dim``, no
    gradient (default: :func:`probe_input`); ``passes_group``: the target is given a group (the
    world as one group of the layout with ``groups``, else the world group)."""
    if shape is None or dim is None:
        shape, dim = probe_input(contract)
    groups = (tuple(range(world)),) if contract.groups and passes_group else ()
    world_group = passes_group and not groups
    if contract.relayout:
        return _relayout_probe_case(contract, world, dtype, output, groups, world_group)
    if contract.collective == "all-to-all":  # shape's rows to every rank
        sent = list(shape)
        sent[dim] *= world
        rank = RankSpec(tuple(sent), splits=(shape[dim],) * world)
    else:  # a gather's input, a reduce-scatter's slot
        rank = RankSpec(shape)
    return Case(ranks=(rank,) * world, dim=dim, dtype=dtype, grad="none", backend=contract.backend,
                device=contract.device, groups=groups, output=output, world_group=world_group,
                collective=contract.collective, op=contract.op, root=contract.root)


def probe_input(contract: Contract) -> tuple[tuple[int, ...], int]:
    """The probe's input shape and dim: :data:`PROBE_SHAPE` along dim 0, or, where the contract
    draws no 1-d input or fixes another dim, the fewest dims it draws, 3 long along its dim and 2
    along the others."""
    ndim = (contract.ndim_range or (1, 1))[0]
    dim = contract.fixed_dim or 0
    return tuple(PROBE_SHAPE[0] if d == dim % ndim else 2 for d in range(ndim)), dim


def _relayout_probe_case(contract: Contract, world: int, dtype: str, output: str,
                         groups: tuple[tuple[int, ...], ...], world_group: bool) -> Case:
    """A re-layout's probe case: the fewest dims the contract draws, each 2 long but the gather dim
    (3 per rank) and the scatter dim (2 heads for every rank), at its fixed dims or the first two
    others (gather dim 1, scatter dim 2: batch, sequence, heads)."""
    ndim = contract.ndim_range[0] if contract.ndim_range else 3
    gather, scatter = contract.probe_dims(ndim)
    shape = [2] * ndim
    shape[gather % ndim], shape[scatter % ndim] = PROBE_SHAPE[0], 2 * world
    rank = RankSpec(tuple(shape), splits=(2,) * world)
    return Case(ranks=(rank,) * world, dim=gather, dtype=dtype, grad="none", backend=contract.backend,
                device=contract.device, groups=groups, output=output, world_group=world_group,
                collective=contract.collective, scatter_dim=scatter)


def _reading(outcome: Outcome, world: int, target: str) -> str:
    """The one convention every rank's result fits; :class:`Misfit` otherwise."""
    results = _members(outcome)
    misfits = [res for res in results if res.misfit]
    if misfits:
        raise Misfit(f"target {target!r}: called on {world} rank(s), rank {misfits[0].rank} {misfits[0].misfit}")
    readings = {res.rank: res.detected for res in results}
    if len(set(readings.values())) > 1:
        shown = ", ".join(f"rank {r}: {output}" for r, output in readings.items())
        raise Misfit(f"target {target!r}: called on {world} ranks, their results read differently ({shown}); "
                     f"declare --output to check one way")
    return next(iter(readings.values()))
