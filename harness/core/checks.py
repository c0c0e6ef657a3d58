"""The properties: compare what each rank observed with the reference.

Each property is a named check returning :class:`~harness.core.compare.Violation` objects; nothing
here raises: callers decide what a violation means.  ``stable`` and ``repeatable`` compare a
result with the first copy of itself, never the reference, so they fire only for what changes
between calls, not for what ``values``/``bits`` already explain.

Embedded in repro scripts, which run exactly these comparisons: imports only torch and other
embedded modules, relatively.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

from .. import reference
from .case import Case, make_input
from .compare import (
    Expected,
    Violation,
    check_bits,
    check_like,
    check_values,
    element_text,
    exact_value,
    first_false,
    identical,
    index_text,
)
from .contract import COLLECTIVES, DIFFERENTIABLE_DTYPES
from .outputs import OUTPUTS
from .procedure import BatchSummary, RankResult

if TYPE_CHECKING:
    from harness.pool.faults import Outcome

#: Property names, in the order they are checked and reported.
PROPERTIES: tuple[str, ...] = (
    "no-hang-no-crash",
    "dtype",
    "shape",
    "device",
    "values",
    "bits",
    "inputs-untouched",
    "gradients",
    "stable",
    "repeatable",
    "misuse",
)
_PHASE_PROPERTY = {"setup": "no-hang-no-crash", "forward": "values", "backward": "gradients", "repeat": "stable"}


def check_outcome(outcome: Outcome, *, bits: bool = True) -> list[Violation]:
    """Every in-contract property, for every rank; empty when the case passed.

    A rank that raised is reported under its phase's property first, whether its peers then
    blocked or returned (a race): the same failure must land in the same place every time, or
    shrinking would stop at the first flip.
    """
    if outcome.fault == "exception":
        return _raised_while_others_wait(outcome)
    if outcome.fault:
        return [Violation("no-hang-no-crash", outcome.fault, None, outcome.describe_fault())]
    violations: list[Violation] = []
    for result in outcome.results:
        assert result is not None  # no fault means every rank returned
        violations += check_result(outcome.case, result, bits=bits)
    return sorted(violations, key=_reported_order)


def _reported_order(violation: Violation) -> tuple[bool, int, int]:
    """Exceptions first (the earliest phase first), then by property and rank."""
    return (violation.kind != "exception", PROPERTIES.index(violation.property),
            violation.rank if violation.rank is not None else -1)


def _raised_while_others_wait(outcome: Outcome) -> list[Violation]:
    """The ranks that raised, each under its phase's property; the first says where the others waited."""
    raised = sorted((_raised(result) for result in outcome.errors), key=_reported_order)
    waiting = [fault.describe() for fault in outcome.faults if fault.state != "raised"]
    if not waiting:  # not diagnosed (a search step): who did not return is all that is known
        waiting = [f"rank {r} did not return" for r, result in enumerate(outcome.results) if result is None]
    first = raised[0]
    note = "meanwhile, waiting for the rank(s) that raised:\n" + _indent("\n".join(waiting))
    return [Violation(first.property, first.kind, first.rank, f"{first.message}\n{note}"), *raised[1:]]


def check_result(case: Case, result: RankResult, *, bits: bool = True) -> list[Violation]:
    """The properties of one rank that returned: output, input, gradient, stability."""
    if result.error:
        return [_raised(result)]
    if result.idle:
        return []
    r = result.rank
    judged = case.judged(r)  # a reduce's or a gather-to's other members may return anything
    expected = expected_pieces(case, r) if judged else []
    names = OUTPUTS[case.output].piece_names(len(expected))
    found = _check_pieces(result, expected, names, bits=bits) if judged else []
    untouched = [] if result.in_place else check_input_untouched(case, result)
    found += untouched
    if gradients_checked(case):
        written = any(v.kind == "in-place" for v in untouched)
        found += [_caused_by_the_write(v) if written else v for v in check_gradient(case, result)]
    if result.repeat_output is not None and not found and judged:
        found += _check_stability(case, result, names, bits=bits)
    return found


def _check_pieces(result: RankResult, expected: list[Expected], names: list[str], *, bits: bool) -> list[Violation]:
    """Device, dtype, shape, values and bits of every piece of the first result."""
    r = result.rank
    got = result.output or []
    if len(got) != len(expected):
        return [Violation("values", "mismatch", r, f"output has {len(got)} pieces, but should have {len(expected)} on rank {r}")]
    found: list[Violation] = []
    for name, piece, device, want in zip(names, got, result.output_devices, expected):
        found += check_device(name, device, result.device, r) or _check_piece(name, piece, want, r, bits=bits)
    return found


def _check_piece(name: str, piece: torch.Tensor | None, want: Expected, r: int, *, bits: bool,
                 where: str = "") -> list[Violation]:
    """dtype and shape, then values, then (with ``bits``, for an exact reference) raw bytes."""
    exact = want if isinstance(want, torch.Tensor) else None
    if exact is not None and bits and identical(piece, exact):
        return []  # the same bytes: every comparison below passes (what nearly every piece shows)
    return (check_like(name, piece, exact_value(want), r, where=where)
            or check_values("values", name, piece, want, r, where=where)
            or (check_bits("bits", name, piece, exact, r, where=where) if bits and exact is not None else []))


def _check_stability(case: Case, result: RankResult, names: list[str], *, bits: bool) -> list[Violation]:
    """The first result is unchanged by later calls (stable), a second call on other values is
    right (checked as values, under their own properties), and the same call made again gives
    the same bits (repeatable)."""
    r = result.rank
    found: list[Violation] = []
    first = result.output or []
    companion = expected_pieces(case, r, companion=True)
    for k, name in enumerate(names):
        original = first[k]
        if original is None:
            continue
        later = (result.output_later or [None] * len(names))[k]
        found += check_bits("stable", name, later, original, r, where=_LATER)
        second = (result.companion_output or [None] * len(names))[k]
        found += _check_piece(name, second, companion[k], r, bits=bits, where=_COMPANION)
        again = (result.repeat_output or [None] * len(names))[k]
        found += check_bits("repeatable", name, again, original, r, where=_AGAIN)
    return found


def expected_pieces(case: Case, rank: int, *, companion: bool = False) -> list[Expected]:
    """The reference pieces of ``rank``: for a gather the same for every member of its group, so
    computed once per group; every rank's own for the other collectives."""
    members = case.members(rank)
    shared = case.collective == "gather" and members
    return _group_pieces(case, members[0] if shared else rank, companion)


@functools.lru_cache(maxsize=64)
def _group_pieces(case: Case, first: int, companion: bool) -> list[Expected]:
    """Cached: shrinking and replays run the same case many times.  Never modified by a check."""
    return reference.expected_pieces(case, first, companion=companion)


@functools.lru_cache(maxsize=256)
def _original_input(case: Case, rank: int) -> torch.Tensor:
    return make_input(case, rank)


@functools.lru_cache(maxsize=256)
def _expected_grad(case: Case, rank: int, contract: str) -> reference.ExpectedGrad:
    return reference.expected_grad(case, rank, contract)


def precompute_reference(case: Case, *, stability: bool) -> None:
    """Compute (into the caches) what :func:`check_outcome` will compare ``case``'s results with,
    while the ranks run it: the driver would otherwise only wait."""
    for rank in range(case.world_size):
        if case.idle(rank):
            continue
        if case.judged(rank):
            expected_pieces(case, rank)
        if stability and case.judged(rank):
            expected_pieces(case, rank, companion=True)
        _original_input(case, rank)
        if gradients_checked(case):
            _expected_grad(case, rank, case.grad)


def gradients_checked(case: Case) -> bool:
    """Whether ``case``'s ranks run the backward pass (and their input requires grad)."""
    return case.grad != "none" and case.dtype in DIFFERENTIABLE_DTYPES


def check_input_untouched(case: Case, result: RankResult) -> list[Violation]:
    """Values, strides and, where gradients are checked, the version counter of the input: a call
    writing the same values back into it still moves the counter, and autograd checks it.
    Without gradients it is a note (:data:`IN_PLACE_NOTE`)."""
    r = result.rank
    if result.input_stride_after is not None:
        return [Violation("inputs-untouched", "mismatch", r, f"input.stride()={result.input_stride_after} changed by the call on rank {r}")]
    changed = check_bits("inputs-untouched", "input", result.input_after, _original_input(case, r), r,
                         where="after the call")
    if changed and gradients_checked(case) and not written_in_place(result):
        return [dataclasses.replace(v, message=f"{v.message}: {UNCOUNTED_WRITE}") for v in changed]
    if changed or not written_in_place(result) or not gradients_checked(case):
        return changed
    return [Violation("inputs-untouched", "in-place", r,
                      f"input was written in place on rank {r} ({_version_text(result)}) though its values are "
                      f"unchanged: {IN_PLACE_CONSEQUENCE}")]


#: What an in-place write into a collective's input does in a real model, said once for messages and notes.
IN_PLACE_CONSEQUENCE = ("in real code, autograd raises 'one of the variables needed for gradient computation has "
                        "been modified by an inplace operation' when the op before the collective saved its output "
                        "(relu, sigmoid, ...)")


#: What a write the version counter did not see does (c10d's collectives write so), measured:
#: docs/findings/inplace_all_reduce_silent_gradient.py.
UNCOUNTED_WRITE = ("the write did not move autograd's version counter (c10d's collectives write so), so where the op "
                   "before the collective saved its output (sigmoid, tanh, exp, ...), backward silently uses the "
                   "overwritten values: a wrong gradient, no error")


def written_in_place(result: RankResult) -> bool:
    """The first call bumped the input's version counter: it wrote into ``x``, whatever it wrote
    (not where x is its result: a collective that returns None and leaves its result there)."""
    moved = result.input_version is not None and result.input_version[1] != result.input_version[0]
    return moved and not result.in_place


#: The note for an in-place write where no gradient is checked: not a violation there.
IN_PLACE_NOTE = (f"the target writes into its input in place (its version counter moves) though the values stay the "
                 f"same: harmless without gradients, but where its input requires grad, {IN_PLACE_CONSEQUENCE}")


def outcome_notes(outcome: Outcome) -> list[str]:
    """What ``outcome`` shows that is worth a note but breaks no property of its case."""
    case = outcome.case
    written = any(res is not None and not res.error and written_in_place(res) for res in outcome.results)
    return [IN_PLACE_NOTE] if written and not gradients_checked(case) else []


def _version_text(result: RankResult) -> str:
    before, after = result.input_version or (0, 0)
    return f"its version counter went from {before} to {after}"


def _caused_by_the_write(violation: Violation) -> Violation:
    return dataclasses.replace(violation, message=violation.message + " (the cause: the call wrote into its input "
                                                                      "in place, see inputs-untouched)")


def check_gradient(case: Case, result: RankResult) -> list[Violation]:
    r = result.rank
    if result.no_backward.startswith("shape:"):
        return []  # the output's shape is the violation; a gradient of the wrong shape's output means nothing
    want = _expected_grad(case, r, case.grad)
    got = result.grad
    if got is None:
        why = f" ({result.no_backward.partition(': ')[2]})" if result.no_backward else ""
        return [Violation("gradients", "mismatch", r, f"grad of x=None{why}, but should be "
                                                      f"{_contract_text(case.grad, case.collective)} on rank {r}")]
    like = check_device("grad", result.grad_device, result.device, r, prop="gradients") or check_like(
        "grad", got, want.in_dtype, r, prop="gradients")
    if like:
        return like
    ok = reference.within_bound(got, want)
    if bool(ok.all()):
        return []
    index = first_false(ok)
    message = (
        f"grad{index_text(index)}={element_text(got, index)}, but should be {element_text(want.in_dtype, index)}"
        f" (±{float(want.bound[index]):.3g}; {_contract_text(case.grad, case.collective)}) on rank {r}"
    )
    return [Violation("gradients", "mismatch", r, message)]


def check_device(what: str, got: str | None, want: str, r: int, *, prop: str = "device") -> list[Violation]:
    """A result lives on its rank's own device, index included (``cuda:0`` on rank 1 is wrong)."""
    if got != want:
        return [Violation(prop, "mismatch", r, f"{what}.device={got}, but should be {want} on rank {r}")]
    return []


def check_misuse(outcome: Outcome) -> list[Violation]:
    """A misuse case (out-of-contract input): every rank must raise in time, or the answer must be right."""
    if outcome.fault:
        return [Violation("misuse", outcome.fault, None, outcome.describe_fault())]
    results = [res for res in outcome.results if res is not None and not res.idle]
    if all(res.error for res in results):
        return []
    raised = [res.rank for res in results if res.error]
    if raised:
        return [Violation("misuse", "exception", None,
                          f"ranks {raised} raised but ranks {[res.rank for res in results if not res.error]} returned")]
    return [v for res in results for v in check_misuse_result(outcome.case, res)][:1]


def check_misuse_result(case: Case, result: RankResult) -> list[Violation]:
    """One rank that returned from a misuse case: its answer must be right (values, not bits)."""
    r = result.rank
    if OUTPUTS[case.output].stacked and case.is_ragged:
        return [Violation("misuse", "wrong-answer", r,
                          f"returned a result for inputs of different shapes, which cannot be stacked, on rank {r}")]
    if not case.judged(r):
        return []
    expected = expected_pieces(case, r)
    wrong = _check_pieces(result, expected, OUTPUTS[case.output].piece_names(len(expected)), bits=False)
    return [Violation("misuse", "wrong-answer", v.rank, "silently wrong answer out of contract: " + v.message) for v in wrong]


def matching_contracts(outcome: Outcome, candidates: Iterable[str] | None = None) -> frozenset[str] | None:
    """The gradient contracts (local, sum, mean; or only those of ``candidates``) the returned
    gradients match on every rank; ``None`` when the case says nothing about gradients.  Callers
    intersect over cases, so a contract an earlier case ruled out need not be computed again."""
    case = outcome.case
    if outcome.fault or outcome.errors or case.dtype not in DIFFERENTIABLE_DTYPES:
        return None
    results = [res for res in outcome.results if res is not None and not res.idle]
    contracts = COLLECTIVES[case.collective].grads if candidates is None else tuple(candidates)
    return frozenset(contracts).intersection(*(contracts_matched(case, res, contracts) for res in results))


def contracts_matched(case: Case, result: RankResult, candidates: Iterable[str] | None = None) -> frozenset[str]:
    """The gradient contracts (of ``candidates``, default all) one rank's gradient matches (none
    without a gradient of ``x``'s shape).  The case's own contract's gradient is the one the check
    computed already (cached)."""
    if result.grad is None or result.input_after is None or result.grad.shape != result.input_after.shape:
        return frozenset()
    contracts = COLLECTIVES[case.collective].grads if candidates is None else candidates
    return frozenset(contract for contract in contracts
                     if bool(reference.within_bound(result.grad, _expected_grad(case, result.rank, contract)).all()))


def batch_notes(summary: BatchSummary, case: Case, result: RankResult, *, semantics: bool) -> None:
    """Count a case that passed on this rank in a batch into ``summary``, with what the controller
    notes of a passing case run the usual way (:func:`outcome_notes`, :func:`matching_contracts`)."""
    summary.passed += 1
    summary.written = summary.written or (written_in_place(result) and not gradients_checked(case))
    if semantics:
        applies = not result.idle and case.dtype in DIFFERENTIABLE_DTYPES
        summary.matched.append(contracts_matched(case, result) if applies else None)


# ---------------------------------------------------------------------------------------------


def _raised(result: RankResult) -> Violation:
    prop = _PHASE_PROPERTY.get(result.error_phase or "forward", "values")
    return Violation(prop, "exception", result.rank, f"rank {result.rank} raised in the {result.error_phase}: "
                                                     f"{result.error_line()}\n{_indent(result.error or '')}")


#: Where a stability comparison looked, as messages say it.
_LATER = "the first result, read again after the further calls"
_COMPANION = "a second call, on the companion input: every input bit inverted"
_AGAIN = "the same call made again"


def _contract_text(contract: str, collective: str = "gather") -> str:
    if contract == "adjoint":
        return {"reduce-scatter": "contract adjoint: the gather of every rank's C_r (÷W for a mean)",
                "split": "contract adjoint: the gather of every rank's C_r",
                "scatter": "contract adjoint: on the source the gather of every rank's C_r, elsewhere 0",
                "reduce": "contract adjoint: the destination's C (÷W for a mean)",
                "gather-to": "contract adjoint: the destination's C[slot r]",
                "all-to-all": "contract adjoint: the reverse all-to-all of the cotangents"}.get(collective, contract)
    if COLLECTIVES[collective].dimless:  # every rank's cotangent is the result's shape: no slot
        return {"identity": "contract identity: C_r", "sum": "contract sum: Σ_s C_s",
                "mean": "contract mean: (1/W) Σ_s C_s"}.get(contract, contract)
    return {
        "local": "contract local: C_r[slot_r]",
        "sum": "contract sum: Σ_s C_s[slot_r]",
        "mean": "contract mean: (1/W) Σ_s C_s[slot_r]",
    }.get(contract, contract)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())
