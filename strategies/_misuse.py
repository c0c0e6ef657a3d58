"""Misuse cases: out-of-contract input (ragged where only equal lengths are claimed, a dim or a
dtype the contract leaves out), on which every rank must raise rather than return or hang.

One concern: which misuse a contract leaves to try, and drawing it; in-contract cases are
:mod:`harness.strategies._internal`'s.
"""

from __future__ import annotations

from hypothesis import strategies as st

from harness.core.case import Case
from harness.core.contract import ALL_DTYPES, Contract
from harness.core.errors import UsageError

from ._internal import (
    _RANK_TRAITS,
    SIMPLEST_DTYPES,
    RankTraits,
    _as_drawn,
    _cases,
    _check_contract,
    _check_target,
    simplest_first,
)
from ._shapes import _NDIM, RaggedShapes, _ragged_shapes, _shape_args
from ._validation import check_names

#: The ways a case can fall outside a contract, in the order misuse cases try them.
_MISUSE_KINDS = ("ragged", "dim", "dtype")


def contract_violations(case: Case, contract: Contract) -> tuple[str, ...]:
    """How ``case`` falls outside ``contract``: a subset of ``("ragged", "dim", "dtype")``.

    A dim is out of contract for a fixed-dim variant only if it names another dim than the
    fixed one (``dim=-1`` on 1-d input *is* dim 0).
    """
    fixed = contract.fixed_dim
    found = {
        "ragged": case.is_ragged and not contract.ragged,
        "dim": fixed is not None and case.dim % case.ndim != fixed % case.ndim,
        "dtype": case.dtype not in contract.dtypes,
    }
    return tuple(kind for kind in _MISUSE_KINDS if found[kind])


def has_misuse(contract: Contract, dtypes_supported: tuple[str, ...]) -> bool:
    """Whether :func:`misuse_cases` has anything to draw for this contract."""
    _check_contract(contract)
    return bool(_misuse_kinds(contract, check_names("dtypes_supported", dtypes_supported, ALL_DTYPES)))


def _misuse_kinds(contract: Contract, supported: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds of misuse a contract leaves room for.

    Ragged and dim misuse cases use an in-contract dtype the backend supports, so that the one
    thing wrong with the case is the one being tried; a ragged one needs W >= 2.
    """
    usable = bool(_in_contract_dtypes(contract, supported))
    possible = {
        "ragged": not contract.ragged and contract.world_sizes[1] >= 2 and usable,
        "dim": contract.fixed_dim is not None and usable,
        "dtype": bool(_misuse_dtypes(contract)),
    }
    return tuple(kind for kind in _MISUSE_KINDS if possible[kind])


def _no_misuse_to_try(contract: Contract) -> str:
    """Why a contract leaves no misuse to try: it claims every dtype (and so some supported
    one), any dim, and ragged input or a single rank."""
    if contract.ragged:
        reason = "claims every dtype, any dim and ragged input"
    else:
        reason = f"claims every dtype and any dim, and world_sizes={contract.world_sizes} leaves no room for ragged ranks"
    return (
        f"contract={contract.describe()!r} leaves no misuse to try: it {reason}; "
        "drop --probe-misuse or narrow the contract"
    )


def _in_contract_dtypes(contract: Contract, supported: tuple[str, ...]) -> tuple[str, ...]:
    return simplest_first(tuple(name for name in contract.dtypes if name in supported))


def _misuse_dtypes(contract: Contract) -> tuple[str, ...]:
    """Every dtype the variant does not claim, whether or not the backend can carry it:
    either way every rank must raise."""
    return tuple(name for name in SIMPLEST_DTYPES if name not in contract.dtypes)


def misuse_cases(
    *,
    contract: Contract,
    dtypes_supported: tuple[str, ...],
    backend: str = "gloo",
    device: str = "cpu",
    max_length: int = 300,
    max_elements: int = 4096,
) -> st.SearchStrategy[Case]:
    """Cases outside ``contract`` in exactly one way, on which every rank must raise.

    - ``contract``: the variant's contract; must leave some misuse to try (see :func:`has_misuse`).
    - ``dtypes_supported``: the dtype names the backend really carries (measured); ragged and
      dim misuse cases draw their dtype from the contract's dtypes among these.
    - ``backend``, ``device``, ``max_length``, ``max_elements``: as in :func:`cases`.

    The kinds: ragged lengths for an equal-only variant (W >= 2, lengths not all equal),
    a dim other than the fixed one for a fixed-dim variant (ndim >= 2), a dtype outside
    ``contract.dtypes``.  ``case.grad`` is ``"none"``: the forward call must already raise.
    Examples shrink as :func:`cases` does, toward the misuse case with the fewest choices (often
    one rank of the simplest out-of-contract dtype).
    """
    _check_contract(contract)
    supported = check_names("dtypes_supported", dtypes_supported, ALL_DTYPES)
    kinds = _misuse_kinds(contract, supported)
    if not kinds:
        raise UsageError(_no_misuse_to_try(contract))
    target = _check_target(backend, device)
    return st.one_of(
        [_as_drawn(_cases(*_misuse_case(kind, contract, supported, max_length, max_elements), "none", *target,
                          output=contract.read_as.name, groups=contract.groups),
                   contract.with_(ragged=contract.ragged or kind == "ragged")) for kind in kinds]
    )


def _misuse_case(
    kind: str, contract: Contract, supported: tuple[str, ...], max_length: int, max_elements: int
) -> tuple[st.SearchStrategy[tuple[RaggedShapes, tuple[RankTraits, ...]]], tuple[str, ...]]:
    """Shapes (with rank traits) and dtype names for a ``kind`` misuse case: out of the contract in that way only."""
    ragged, dims, names = contract.ragged, contract.drawn_dims, _in_contract_dtypes(contract, supported)
    low, high = contract.world_sizes
    if kind == "ragged":
        ragged, low = True, max(low, 2)
    elif kind == "dim":
        dims = "any"
    else:
        names = _misuse_dtypes(contract)
    ndims = contract.ndim_range or _NDIM
    if kind == "dim":
        ndims = (max(ndims[0], 2), max(ndims[1], 2))
    shapes = _ragged_shapes(*_shape_args((low, high), ragged, ndims, dims, max_length, max_elements), _RANK_TRAITS)
    if kind == "ragged":
        shapes = shapes.filter(lambda drawn: _has_unequal_lengths(drawn[0]))
    elif kind == "dim":  # any dim but the fixed one, by either name
        fixed = contract.fixed_dim or 0
        shapes = shapes.filter(lambda drawn: drawn[0].dim % len(drawn[0].shapes[0]) != fixed % len(drawn[0].shapes[0]))
    return shapes, names


def _has_unequal_lengths(drawn: RaggedShapes) -> bool:
    return len({shape[drawn.dim] for shape in drawn.shapes}) > 1


__all__ = ["contract_violations", "has_misuse", "misuse_cases"]
