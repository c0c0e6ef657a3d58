"""The single-process reference: what a correct collective returns and what gradient it gives.

Everything is rebuilt from the :class:`~harness.core.case.Case` on CPU, in one process, with
plain ``torch.cat`` and exact sums, so the reference shares no code path with the code under
test.  It works in group space: rank r gets its group's members in group-rank order, W is the
size of r's group.  Repro scripts embed it: it imports only torch and the core, relatively.
A reduction's float result is judged like the ``sum``/``mean`` gradient contracts; an
``adjoint`` gradient is a copy (bound 0), or a copy divided by W for a mean.  Each gradient
element may err by the bound derived in ``docs/properties.md``: 0 for a copy and wherever the
sum is exact whatever the order, else (W-1)·eps·A + ½·ulp for ``sum`` (A the sum of magnitudes).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from ..core.case import Case, input_values, make_cotangent, torch_dtype
from ..core.contract import COLLECTIVES, DIFFERENTIABLE_DTYPES
from ..core.outputs import OUTPUTS

#: The bitwise reductions, as torch computes them one pair at a time (integers: exact in any order).
_BITWISE = {"band": torch.bitwise_and, "bor": torch.bitwise_or, "bxor": torch.bitwise_xor}

__all__ = ["ExpectedGrad", "expected_grad", "expected_output", "expected_pieces", "expected_reduction",
           "within_bound"]


class ExpectedGrad(NamedTuple):
    """The expected gradient of one rank's input, or the expected result of a float reduction.

    - ``exact``: the exact value, float64 (complex128 for complex dtypes), the input's shape.
    - ``bound``: float64, same shape: the absolute error allowed per element (per part for
      complex), 0 where the result must be exact.
    - ``in_dtype``: ``exact`` rounded to the case dtype: what an exact variant returns.
    """

    exact: torch.Tensor
    bound: torch.Tensor
    in_dtype: torch.Tensor


def expected_output(case: Case, rank: int = 0, *, companion: bool = False) -> torch.Tensor:
    """What rank ``rank`` must get, on CPU in the case dtype.

    A gather: ``cat_dim`` of its group's inputs in group-rank order (the whole world without
    groups), or their ``stack`` for ``stack`` results.  A reduce-scatter: the reduction of
    every member's slot ``rank`` (rounded to the dtype: :func:`expected_reduction` has the
    bound a float sum is judged within).  An all-to-all: ``cat_dim`` of the rows each member
    sends ``rank``, in member order (a re-layout: the pieces of its scatter dim, concatenated
    along the gather dim ``dim``).  An all-reduce: the reduction of every member's input.  A split:
    slot ``rank`` of x (the same on every member); a copy: x; a broadcast: the source's x, a scatter
    its slot ``rank``.  A reduce or a gather to one rank: what the destination gets (the others are
    not judged: :meth:`Case.judged`).
    ``companion``: of the companion inputs, the second call's.
    """
    if COLLECTIVES[case.collective].reduces:
        reduced = expected_reduction(case, rank, companion=companion)
        return reduced if isinstance(reduced, torch.Tensor) else reduced.in_dtype
    if case.collective == "all-to-all":
        return torch.cat(received_rows(case, rank, companion=companion), dim=case.dim)
    if COLLECTIVES[case.collective].rooted:  # the source's x, or its slot rank
        return _reduced_part(input_values(case, case.members(rank)[case.root], companion=companion), case, rank)
    if COLLECTIVES[case.collective].replicated:  # the same x on every member: its slot, or all of it
        return _reduced_part(input_values(case, rank, companion=companion), case, rank)
    inputs = [input_values(case, member, companion=companion) for member in case.members(rank)]
    return torch.stack(inputs) if OUTPUTS[case.output].stacked else torch.cat(inputs, dim=case.dim)


def received_rows(case: Case, rank: int, *, companion: bool = False) -> list[torch.Tensor]:
    """All-to-all: the rows each member of ``rank``'s group sends it, in member order."""
    return [input_values(case, s, companion=companion).narrow(case.split_axis, case.sent_offset(s, rank), rows)
            for s, rows in zip(case.members(rank), case.received(rank))]


def expected_pieces(case: Case, rank: int, *, companion: bool = False) -> list[torch.Tensor | ExpectedGrad]:
    """The result of rank ``rank`` as its convention reads it: for ``list`` results each group
    member's input (a gather) or the rows from each (an all-to-all), the bounded value of a
    float reduction, else the one tensor of :func:`expected_output`."""
    if OUTPUTS[case.output].per_rank and case.collective == "all-to-all":
        return list(received_rows(case, rank, companion=companion))
    if OUTPUTS[case.output].per_rank:
        return [input_values(case, member, companion=companion) for member in case.members(rank)]
    if COLLECTIVES[case.collective].reduces:
        return [expected_reduction(case, rank, companion=companion)]
    return [expected_output(case, rank, companion=companion)]


def expected_reduction(case: Case, rank: int, *, companion: bool = False) -> torch.Tensor | ExpectedGrad:
    """A reduction's result on rank ``rank``: its slot of every member's input (an all-reduce: the
    whole input), reduced.

    Float ``sum`` and ``mean`` are judged within the bound of the module docstring (the same
    as a gradient's ``sum`` and ``mean`` contracts: a reduction in any order or tree is
    right); integer sums and products wrap, as every backend computes them, and ``max``,
    ``min`` and the bitwise ones are exact: each is a plain tensor.
    """
    members = case.members(rank)
    slots = torch.stack([_reduced_part(input_values(case, s, companion=companion), case, rank) for s in members])
    if case.op == "max":
        return slots.amax(0)
    if case.op == "min":
        return slots.amin(0)
    if case.op == "product":  # integers: exact, wrapping as the dtype's multiplication does
        return slots.to(torch.int64).prod(0).to(slots.dtype)
    if case.op in _BITWISE:
        return functools.reduce(_BITWISE[case.op], slots.unbind(0))
    if not (slots.is_floating_point() or slots.is_complex()):
        return slots.sum(0, dtype=torch.int64).to(slots.dtype)
    return _bounded(torch.stack([_parts(slot) for slot in slots]), len(members) if case.op == "mean" else 1,
                    case.dtype)


def _reduced_part(values: torch.Tensor, case: Case, rank: int) -> torch.Tensor:
    """What of a member's input goes into ``rank``'s result: its slot ``rank`` (a reduce-scatter, a split), or all of it."""
    if COLLECTIVES[case.collective].dimless:
        return values
    return values.narrow(case.dim, case.offset(rank), case.lengths[rank])


def expected_grad(case: Case, rank: int, contract: str) -> ExpectedGrad:
    """The gradient rank ``rank``'s input must get under ``contract``.

    A gather's contracts (``local``/``sum``/``mean``; an all-reduce's ``identity``/``sum``/``mean``,
    whose slot is the whole cotangent): each member s of the rank's group
    feeds ``C_s = make_cotangent(case, s)``; the rank's slot is its length along the gather
    dim at offset ``case.offset(rank)``, or its index along the first dim of a ``stack``
    result.  ``adjoint``, the contract of a reduce-scatter and an all-to-all: the reverse
    collective of the cotangents (a gather of every member's C_r, divided by W for a mean;
    the rows of every member's C_r that came from this rank: for a re-layout, the reverse
    re-layout, scattering along the gather dim and gathering along the scatter dim; a scatter's: the
    gather on the source, zero elsewhere; a reduce's and a gather-to's: the destination's C_dst, slot
    ``rank`` of it, on every member).  Raises ValueError for
    ``none`` (nothing to expect), a contract the collective has not, a dtype without
    gradients, a rank out of range or an idle rank.
    """
    grads = COLLECTIVES[case.collective].grads
    if contract not in grads:
        raise ValueError(f"contract={contract!r} has no expected gradient for a {case.collective}; use one of "
                         f"{', '.join(grads)}")
    if case.dtype not in DIFFERENTIABLE_DTYPES:
        needed = ", ".join(sorted(DIFFERENTIABLE_DTYPES))
        raise ValueError(f"dtype={case.dtype!r} has no gradients; expected_grad needs one of {needed}")
    if not 0 <= rank < case.world_size or case.idle(rank):
        raise ValueError(f"rank={rank} is out of range for W={case.world_size} or idle in groups={case.groups}")
    members = case.members(rank)
    kind = COLLECTIVES[case.collective]
    if kind.rooted and rank != members[case.root]:  # only the source's x is read
        zeros = torch.zeros(case.input_shape(rank), dtype=torch_dtype(case.dtype))
        return _bounded(_parts(zeros).unsqueeze(0), 1, case.dtype)
    if kind.to_root:  # the adjoint of a reduce or a gather to one rank: the destination's C, its slot r
        terms = _parts(_slot(make_cotangent(case, members[case.root]), case, rank)).unsqueeze(0)
        return _bounded(terms, len(members) if case.op == "mean" else 1, case.dtype)
    if kind.slotted:  # a reduce-scatter's or a split's adjoint: the gather of C
        gathered = torch.cat([make_cotangent(case, r) for r in members], dim=case.dim)
        return _bounded(_parts(gathered).unsqueeze(0), len(members) if case.op == "mean" else 1, case.dtype)
    if case.collective == "all-to-all":
        returned = torch.cat([make_cotangent(case, r).narrow(case.dim, case.received_offset(r, rank),
                                                             case.sent_rows(rank, r))
                              for r in members], dim=case.split_axis)
        return _bounded(_parts(returned).unsqueeze(0), 1, case.dtype)
    senders = [rank] if contract in ("local", "identity") else members
    # (senders, *shape, part): every term as float64 real parts, exact since each is a dtype value.
    terms = torch.stack([_parts(_slot(make_cotangent(case, s), case, rank)) for s in senders])
    return _bounded(terms, len(members) if contract == "mean" else 1, case.dtype)


def _bounded(terms: torch.Tensor, divisor: int, dtype: str) -> ExpectedGrad:
    """The sum over the first axis of ``terms`` (float64 parts, see :func:`_parts`) divided by
    ``divisor``, with the error any evaluation order in ``dtype`` may make (module docstring)."""
    exact = _fsum(terms) / divisor
    info = torch.finfo(_part_dtype(dtype))
    total = terms.abs().sum(0)
    if terms.shape[0] == 1 and not divisor & (divisor - 1):
        scale = 0.0  # one term over 2^k: at most the final rounding, where the quotient is subnormal
    else:
        scale = (terms.shape[0] - 1) * info.eps if divisor == 1 else info.eps
    bound = scale * total + _ulp(exact, info) / 2
    bound[_exact_whatever_the_order(terms, total, exact, divisor, info)] = 0.0
    exact_value = torch.view_as_complex(exact) if exact.shape[-1] == 2 else exact.squeeze(-1)
    return ExpectedGrad(
        exact=exact_value,
        # a NaN term makes its part NaN (matched as NaN, not within a bound): it must not
        # take the other part's bound with it
        bound=bound.nan_to_num(nan=0.0).amax(-1),
        in_dtype=exact_value.to(torch_dtype(dtype)),
    )


def within_bound(got: torch.Tensor, expected: ExpectedGrad) -> torch.Tensor:
    """Bool mask, ``expected.exact``'s shape: where ``got`` is within ``expected.bound``.

    Each part (real, imaginary) must be within the bound, or equal to the exact value (so
    infinities match themselves); NaN is never within the bound unless the exact value is NaN, and
    a complex NaN (either part) matches any complex NaN.
    """
    if tuple(got.shape) != tuple(expected.exact.shape):
        raise ValueError(f"got.shape={tuple(got.shape)}, but should be {tuple(expected.exact.shape)}")
    if got.is_complex() != expected.exact.is_complex():
        raise ValueError(f"got.dtype={got.dtype}, but should be {'complex' if expected.exact.is_complex() else 'real'}")
    have, want = _parts(got.detach().cpu()), _parts(expected.exact)
    close = (have - want).abs() <= expected.bound.unsqueeze(-1)
    same = (have == want) | (have.isnan() & want.isnan())
    # A complex NaN (a NaN in either part) is one value however its parts read: torch's complex
    # arithmetic makes (0+nanj) + 0 nan+nanj where gloo, adding the parts, keeps 0+nanj.
    complex_nan = have.isnan().any(-1) & want.isnan().any(-1) & bool(expected.exact.is_complex())
    return (close | same).all(-1) | complex_nan


def _slot(cotangent: torch.Tensor, case: Case, rank: int) -> torch.Tensor:
    """``cotangent[slot_rank]``: the rank's stretch of the gathered result along the dim, or
    its entry of a stacked result."""
    if COLLECTIVES[case.collective].dimless:
        return cotangent
    if OUTPUTS[case.output].stacked:
        return cotangent[case.members(rank).index(rank)]
    return cotangent.narrow(case.dim, case.offset(rank), case.lengths[rank])


def _parts(t: torch.Tensor) -> torch.Tensor:
    """``t`` as float64 with a trailing axis of parts: (real,) or (real, imag)."""
    if t.is_complex():
        return torch.view_as_real(t.to(torch.complex128).resolve_conj())
    return t.to(torch.float64).unsqueeze(-1)


def _fsum(terms: torch.Tensor) -> torch.Tensor:
    """Correctly rounded elementwise sum over the first axis (``math.fsum``): order-free.  One term
    is its own sum, as ``fsum`` gives it (``-0.0 + 0.0`` is the ``0.0`` it returns): the local
    and adjoint contracts' gradients, without a Python call per element."""
    if terms.shape[0] == 1:
        return terms[0] + 0.0
    rows = terms.flatten(1).T.tolist()
    return torch.tensor([math.fsum(row) for row in rows], dtype=torch.float64).reshape(terms.shape[1:])


def _exact_whatever_the_order(
    terms: torch.Tensor, total: torch.Tensor, exact: torch.Tensor, divisor: int, info: torch.finfo
) -> torch.Tensor:
    """Where every correct evaluation order gives the exact result (see the module docstring).

    ``terms`` is (senders, *shape, parts), one sender for ``local`` and the adjoint
    contracts; ``exact`` the exact result; ``divisor`` is W for a mean, else 1.  Dividing by
    2^k is exact only where the quotient is a value of the dtype: below its smallest normal
    the quotient can fall between subnormals and must round (a float16 cotangent of 1.04e-4
    over W=4), so there the bound applies.
    """
    if divisor & (divisor - 1):
        return torch.zeros_like(total, dtype=torch.bool)
    representable = (exact.abs() >= info.tiny) | (torch.remainder(exact, info.tiny * info.eps) == 0)
    if terms.shape[0] == 1:
        return representable
    significand_bits = 1 - round(math.log2(info.eps))
    return (terms == terms.round()).all(0) & (total <= 2.0**significand_bits) & representable


def _part_dtype(name: str) -> torch.dtype:
    """The real dtype of one part: float32 for complex64, float64 for complex128."""
    return torch_dtype(name).to_real() if torch_dtype(name).is_complex else torch_dtype(name)


def _ulp(x: torch.Tensor, info: torch.finfo) -> torch.Tensor:
    """The spacing of the floats described by ``info`` at ``x`` (float64 in, float64 out).

    ``eps·2^e`` in the binade [2^e, 2^(e+1)) holding |x|; below the smallest normal (and at
    0) the fixed subnormal spacing ``tiny·eps``.
    """
    _, exponent = torch.frexp(x)  # x = m·2^exponent with 0.5 <= |m| < 1
    normal = info.eps * torch.pow(2.0, (exponent - 1).to(torch.float64))
    return torch.where(x.abs() >= info.tiny, normal, info.tiny * info.eps)
