"""The strategies: world sizes, lengths, ragged shapes, dtypes, rank specs, cases, misuse cases.

Every public function checks its arguments when it is called, before anything is drawn, and
raises :class:`harness.core.errors.UsageError` naming the argument, its value and the fix.

Shrinking: choices are ordered simplest first and sizes shrink toward 0, and a case draws
its per-rank lengths first (one list whose size *is* the world size, so the shrinker removes
whole ranks), then its other dims (a list too), dim, dtype and per-rank recipes.  So a
failing case shrinks toward the smallest world, the fewest dims, the shortest lengths,
``float32`` and contiguous ``iota`` inputs with ``ints`` cotangents.

One module, as the strategies build on each other in order (lengths, shapes, rank specs, cases,
misuse cases); the strata's schedule over them is :mod:`harness.strategies._strata`.

One concern: drawing valid cases within a contract; the pairwise schedule is
:mod:`harness.strategies._strata` and the space of cases :mod:`harness.strategies.space`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from harness.strategies._validation import (
    check_bool,
    check_choice,
    check_int,
    check_interval,
    check_min_max,
    check_names,
)
from harness.strategies.space import LONG_LENGTH, allowed
from hypothesis import strategies as st

from harness.core.case import ALL_RECIPES, COTANGENT_LAYOUTS, COTANGENT_RECIPES, LAYOUTS, VALUE_RECIPES, Case, RankSpec
from harness.core.case import recipes_for as case_recipes
from harness.core.contract import ALL_DTYPES, BACKENDS, DEVICES, DIFFERENTIABLE_DTYPES, Contract
from harness.core.contract import MAX_WORLD_SIZE as CONTRACT_MAX_WORLD_SIZE
from harness.core.errors import UsageError
from harness.core.outputs import OUTPUTS

__all__ = [
    "MAX_WORLD_SIZE",
    "Like",
    "SIMPLEST_DTYPES",
    "RaggedShapes",
    "cases",
    "dtypes",
    "group_layout",
    "lengths",
    "ragged_shapes",
    "rank_specs",
    "simplest_first",
    "world_sizes",
]

#: The most ranks a case may have (``harness.core.contract.MAX_WORLD_SIZE``).
MAX_WORLD_SIZE = CONTRACT_MAX_WORLD_SIZE
#: Every dtype, simplest first: the order a failing case's dtype shrinks along.
SIMPLEST_DTYPES: tuple[str, ...] = (
    "float32", "float64", "int64", "int32", "uint8", "int8", "int16", "bool",
    "float16", "bfloat16", "complex64", "complex128",
)
assert sorted(SIMPLEST_DTYPES) == sorted(ALL_DTYPES)

#: Lengths up to this are "short": the branch drawn half the time and shrunk toward.
_SHORT = 4
#: Sizes of the dims other than the gather dim: 1..4, shrinking to 1 ...
_OFF_DIM_SIZES = st.integers(1, 4)
#: ... and about one multi-dim case in ten has one of them 0 (more would empty most cases).
_ZERO_AN_OFF_DIM = st.integers(0, 9).map(lambda k: k == 9)
#: Value recipes whose bits depend on the seed (every cotangent recipe reads it too).
_SEEDED_VALUES = frozenset({"special", "random", "normal"})
_SEEDS = st.integers(0, 2**32 - 1)
_DIMS_OPTIONS = ("0", "any", "nonzero")
#: The dims of drawn cases: 1-d up to 4-d.
_NDIM = (1, 4)

Ex = TypeVar("Ex")
T = TypeVar("T")
#: For draws that need no per-rank traits: draws nothing.
_NO_TRAITS: st.SearchStrategy[None] = st.none()


class RaggedShapes(NamedTuple):
    """Per-rank shapes, equal except along ``dim`` (which may be negative)."""

    shapes: tuple[tuple[int, ...], ...]
    dim: int


def _composite_named(name: str) -> Callable[[Callable[..., Ex]], Callable[..., st.SearchStrategy[Ex]]]:
    """``st.composite`` whose strategies print as ``name(...)``: reprs read as the public call."""

    def decorate(draw_fn: Callable[..., Ex]) -> Callable[..., st.SearchStrategy[Ex]]:
        draw_fn.__name__ = draw_fn.__qualname__ = name
        return st.composite(draw_fn)

    return decorate


# ---------------------------------------------------------------------------------------------
# world sizes and lengths


def world_sizes(*, min_value: int = 1, max_value: int = 4) -> st.SearchStrategy[int]:
    """World sizes W in ``[min_value, max_value]``, shrinking toward ``min_value``.

    - ``min_value`` (default 1): the smallest world; at least 1.
    - ``max_value`` (default 4, the CI default; up to 64): the largest world.

    Inside :func:`lengths`, :func:`ragged_shapes` and :func:`cases` the world size is the size
    of the list of per-rank lengths instead, so that shrinking drops whole ranks.
    """
    low = check_int("min_value", min_value, at_least=1, at_most=MAX_WORLD_SIZE)
    high = check_int("max_value", max_value, at_least=1, at_most=MAX_WORLD_SIZE, example=4)
    check_min_max("min_value", low, "max_value", high)
    return st.integers(low, high)


def lengths(
    *,
    world_sizes: tuple[int, int] = (1, 4),
    ragged: bool = True,
    max_length: int = 300,
    max_total: int = 4096,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Per-rank lengths along the gather dim; the tuple's size is the world size.

    - ``world_sizes`` (default ``(1, 4)``): the (low, high) range of W, within 1..64.
    - ``ragged`` (default True): ranks may hold different lengths; False makes them equal.
    - ``max_length`` (default 300): the longest a rank may be.
    - ``max_total`` (default 4096): the most the lengths may add up to; ranks past the budget
      are cut short (often to 0).

    Half the draws are short (0..4), the rest may be long (up to ``max_length``, so some
    >= 256), which reaches zero-length ranks and all-empty worlds often.  Examples shrink by dropping ranks,
    then toward 0 for every length.
    """
    worlds, ragged, max_length = _length_args(world_sizes, ragged, max_length)
    total = check_int("max_total", max_total, at_least=0, example=4096)
    return _raw_lengths(worlds, ragged, max_length, _NO_TRAITS).map(lambda drawn: _fit_total(drawn[0], total, ragged))


def _length_args(world_sizes: object, ragged: object, max_length: object) -> tuple[tuple[int, int], bool, int]:
    """Checked arguments shared by :func:`lengths` and :func:`ragged_shapes`."""
    return (
        check_interval("world_sizes", world_sizes, at_least=1, at_most=MAX_WORLD_SIZE),
        check_bool("ragged", ragged),
        check_int("max_length", max_length, at_least=0, example=300),
    )


@functools.cache
def _length(cap: int) -> st.SearchStrategy[int]:
    """A short length (0..4) or, when a flag is set, any length up to ``cap``: two choices.

    Not ``one_of(short, long)``: the shrinker cannot move an example from the long branch
    to the short one.  Clearing the flag, then shrinking one integer toward 0, is a path it
    always takes.  Two choices only, because a rank must stay a small span of choices for
    the shrinker to delete whole ranks (see :data:`_RANK_TRAITS`).
    """
    if cap <= _SHORT:
        return st.integers(0, cap)
    return st.tuples(st.booleans(), st.integers(0, cap)).map(lambda drawn: drawn[1] if drawn[0] else drawn[1] % (_SHORT + 1))


@functools.cache
def _raw_lengths(
    worlds: tuple[int, int], ragged: bool, cap: int, traits: st.SearchStrategy[T]
) -> st.SearchStrategy[tuple[tuple[int, ...], tuple[T, ...]]]:
    """Lengths before the total budget, with a trait per rank: ``(lengths, traits)``.

    Lengths are a list (ragged) or one length repeated W times.  Each rank draws its trait
    (its layout, recipes, ...; :data:`_NO_TRAITS` draws nothing) right after its length:
    deleting a rank from the choice sequence then deletes everything about that rank, which
    is how Hypothesis shrinks ``(0,), (0,), (2,) strided`` to ``(2,) strided`` instead of
    stalling.
    """
    low, high = worlds
    if ragged:
        pairs = st.lists(st.tuples(_length(cap), traits), min_size=low, max_size=high)
        return pairs.map(lambda drawn: (tuple(n for n, _ in drawn), tuple(t for _, t in drawn)))
    return st.integers(low, high).flatmap(functools.partial(_equal_lengths, cap=cap, traits=traits))


@functools.cache
def _equal_lengths(w: int, cap: int, traits: st.SearchStrategy[T]) -> st.SearchStrategy[tuple[tuple[int, ...], tuple[T, ...]]]:
    """One length for all ``w`` ranks, and a trait per rank."""
    return st.tuples(_length(cap), st.lists(traits, min_size=w, max_size=w)).map(lambda nt: ((nt[0],) * w, tuple(nt[1])))


def _fit_total(drawn: tuple[int, ...], max_total: int, ragged: bool) -> tuple[int, ...]:
    """Cut lengths to add up to at most ``max_total``: in rank order, or evenly if equal-only.

    A map rather than a filter, so no draw is wasted and smaller draws give smaller lengths.
    """
    if not ragged:
        return tuple(min(n, max_total // len(drawn)) for n in drawn)
    fitted: list[int] = []
    left = max_total
    for n in drawn:
        fitted.append(min(n, left))
        left -= fitted[-1]
    return tuple(fitted)


# ---------------------------------------------------------------------------------------------
# shapes


def ragged_shapes(
    *,
    world_sizes: tuple[int, int] = (1, 4),
    ragged: bool = True,
    ndim: tuple[int, int] = (1, 4),
    dims: str = "any",
    max_length: int = 300,
    max_elements: int = 4096,
) -> st.SearchStrategy[RaggedShapes]:
    """Per-rank shapes that agree except along a gather dim, as a :class:`RaggedShapes`.

    - ``world_sizes`` (default ``(1, 4)``): the (low, high) range of W, within 1..8.
    - ``ragged`` (default True): lengths along the dim may differ; False makes them equal.
    - ``ndim`` (default ``(1, 4)``): the (low, high) range of the number of dims.
    - ``dims`` (default ``"any"``): ``"any"`` draws a dim in ``[-ndim, ndim)``; ``"0"`` always
      uses dim 0; ``"nonzero"`` draws a dim that is not the first (needs ndim >= 2), to
      probe dim-0-only variants; a dim as text (``"1"``, ``"-2"``) always uses that one (a
      re-layout's fixed gather dim; every ndim drawn must have it).
    - ``max_length`` (default 300): the longest a rank may be along the dim.
    - ``max_elements`` (default 4096): the most elements all ranks together may hold.

    The other dims are small: 1..4, and one of them 0 in about one case in ten.  Examples
    shrink toward fewer ranks, fewer dims, dim 0 (then 1, -1, ...), other dims of size 1
    and lengths 0, e.g. ``RaggedShapes(shapes=((0,),), dim=0)``.
    """
    args = _shape_args(world_sizes, ragged, ndim, dims, max_length, max_elements)
    return _ragged_shapes(*args, _NO_TRAITS).map(lambda drawn: drawn[0])


def _shape_args(
    world_sizes: object, ragged: object, ndim: object, dims: object, max_length: object, max_elements: object
) -> tuple[tuple[int, int], bool, tuple[int, int], str, int, int]:
    """Checked :func:`ragged_shapes` arguments, shared with the case strategies."""
    worlds, ragged, max_length = _length_args(world_sizes, ragged, max_length)
    low, high = check_interval("ndim", ndim, at_least=1)
    if isinstance(dims, str) and dims.lstrip("-").isdigit():  # one fixed dim: a re-layout's gather dim
        fewest = int(dims) + 1 if int(dims) >= 0 else -int(dims)
        if low < fewest:
            raise UsageError(f"dims={dims!r} is no dim of a {low}-d shape; pass ndim=({fewest}, {max(high, fewest)})")
    else:
        check_choice("dims", dims, _DIMS_OPTIONS)
    if dims == "nonzero":
        if high < 2:
            fix = f"ndim=(2, {max(high, 2)})"
            raise UsageError(f"ndim={(low, high)!r} leaves no dim but 0 for dims='nonzero'; pass {fix}")
        low = max(low, 2)
    check_int("max_elements", max_elements, at_least=0, example=4096)
    return worlds, ragged, (low, high), dims, max_length, max_elements  # type: ignore[return-value]


@functools.cache
def _dims(ndim: int, dims: str) -> st.SearchStrategy[int]:
    """A gather dim for ``ndim``-d shapes, shrinking toward 0 (or 1 when 0 is excluded)."""
    if dims == "0" or dims.lstrip("-").isdigit():
        return st.just(int(dims))
    if dims == "any":
        return st.integers(-ndim, ndim - 1)
    # 1..ndim-1, then -1..-(ndim-1): every dim but the first, by either name.
    return st.integers(1, 2 * ndim - 2).map(lambda k: k if k < ndim else k - 2 * ndim + 1)


@functools.cache
def _other_dims(ndim: tuple[int, int]) -> st.SearchStrategy[list[int]]:
    """The sizes of the dims besides the gather dim, as a list the shrinker can shorten."""
    return st.lists(_OFF_DIM_SIZES, min_size=ndim[0] - 1, max_size=ndim[1] - 1)


@functools.cache
def _below(n: int) -> st.SearchStrategy[int]:
    return st.integers(0, n - 1)


@functools.cache
def _one_of(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.sampled_from(names)


@_composite_named("ragged_shapes")
def _ragged_shapes(
    draw: st.DrawFn,
    world_sizes: tuple[int, int],
    ragged: bool,
    ndim: tuple[int, int],
    dims: str,
    max_length: int,
    max_elements: int,
    traits: st.SearchStrategy[T],
    like: Like | None = None,
) -> tuple[RaggedShapes, tuple[T, ...]]:
    pattern = like.raggedness if like is not None else None
    # World size (the lengths list) first, so the shrinker prefers fewer ranks over all else.
    drawn, rank_traits = draw(_raw_lengths(world_sizes, ragged and pattern not in _EQUAL, max_length, traits))
    # The other dims as a list whose size is ndim - 1, so the shrinker drops whole dims too.
    others = draw(_other_dims(ndim))
    n = len(others) + 1
    dim = draw(_dims(n, dims))
    zero = like is not None and like.zero_size_dim
    if others and (zero or draw(_ZERO_AN_OFF_DIM)):
        others[draw(_below(n - 1))] = 0
    block = math.prod(others)
    # cut to the element budget, then held to the pattern again (a cut can empty the last ranks)
    fitted = _fit_total(drawn, max_elements // max(block, 1), ragged and pattern not in _EQUAL)
    fitted = _lengths_like(fitted, pattern, first=1 if like is not None and like.groups == "idle ranks" else 0)
    d = dim % n
    shapes = tuple(tuple(others[:d]) + (length,) + tuple(others[d:]) for length in fitted)
    return RaggedShapes(shapes=shapes, dim=dim), rank_traits


@dataclass(frozen=True)
class Like:
    """Cases like one stratum on the axes that choose a gather's code path (``harness.strategies.space``'s
    names): its ``raggedness``, a ``zero_size_dim``, its ``groups`` layout; ``None``: drawn
    freely.  A stratum that failed is searched again among such cases: a bug on the equal-length
    fast path is met in every draw there, not in one in twelve, and shrinks within that path."""

    raggedness: str | None = None
    zero_size_dim: bool = False
    groups: str | None = None

    def fewest_ranks(self) -> int:
        """The smallest world with such a case, by the rules the strata obey
        (:func:`harness.strategies.space.allowed`): two ranks to be equal, to differ or to leave one idle,
        three to interleave, or to be ragged within one of several groups."""
        held = {axis: value for axis, value in (("raggedness", self.raggedness), ("groups", self.groups)) if value}
        return next(w for w in range(1, MAX_WORLD_SIZE + 1) if allowed({"W": str(w), **held}))


#: Raggedness patterns drawn as one length for every rank.
_EQUAL = ("equal", "all empty")


def _lengths_like(drawn: tuple[int, ...], pattern: str | None, first: int = 0) -> tuple[int, ...]:
    """``drawn`` lengths made to hold ``pattern`` on ranks ``first`` on (rank 0 may be idle):
    equal and non-empty, all empty, the last rank empty beside non-empty ones, or non-empty and
    not all equal.  A map, so every draw counts and smaller draws stay smaller (the patterns
    shrink to 1, 0, ``(1, 0)``, ``(1, 2)``)."""
    if pattern is None:
        return drawn
    if pattern == "all empty":
        return (0,) * len(drawn)
    held = [max(n, 1) for n in drawn]
    if pattern == "zero-length rank":
        held[-1] = 0
    elif pattern == "ragged" and len(set(held[first:])) == 1 and len(held) - first > 1:
        held[-1] += 1
    return tuple(held)


def group_layout(kind: str, world: int) -> tuple[tuple[int, ...], ...]:
    """The layout of one kind on ``world`` ranks, derived from the world alone, so a case keeps
    its kind as the shrinker drops ranks: ``world`` (no group), ``one group`` (every rank),
    ``several groups`` (two contiguous halves: ``{0}+{1}`` at W=2), ``idle ranks`` (rank 0 in
    no group, the others one group) and ``interleaved groups`` (even ranks, odd ranks)."""
    everyone = tuple(range(world))
    layouts = {
        "world": (),
        "one group": (everyone,),
        "several groups": (everyone[: (world + 1) // 2], everyone[(world + 1) // 2:]),
        "idle ranks": (everyone[1:],),
        "interleaved groups": (everyone[::2], everyone[1::2]),
    }
    return tuple(group for group in layouts[kind] if group)


# ---------------------------------------------------------------------------------------------
# dtypes and rank specs


def dtypes(*, names: tuple[str, ...] = ALL_DTYPES) -> st.SearchStrategy[str]:
    """Dtype names from ``names``, drawn and shrunk in :data:`SIMPLEST_DTYPES` order.

    - ``names`` (default: all twelve): the dtype names to draw from, in any order.

    Examples shrink toward ``float32``, then ``float64``, the ints, ``bool``, the half
    floats and complex last.
    """
    return st.sampled_from(simplest_first(check_names("names", names, ALL_DTYPES)))


def simplest_first(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` in :data:`SIMPLEST_DTYPES` order (the order dtypes shrink along)."""
    return tuple(name for name in SIMPLEST_DTYPES if name in names)


def rank_specs(shape: tuple[int, ...]) -> st.SearchStrategy[RankSpec]:
    """What one rank holds for input shape ``shape``: layout, value recipe, seed, cotangent.

    - ``shape``: the rank's input shape (at least one dim, no negative sizes).

    Layouts and recipes are drawn in the order of ``harness.core.case`` (simplest first), the seed
    shrinks toward 0.  Examples shrink toward ``RankSpec(shape)``: a contiguous ``iota``
    input, an ``ints`` cotangent, seed 0.
    """
    if (
        not isinstance(shape, (tuple, list))
        or not shape
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise UsageError(f"shape={shape!r} should be a non-empty tuple of sizes >= 0, e.g. shape=(3, 2)")
    return _rank_specs(tuple(shape))


#: (cotangent, cotangent_layout) combinations, simplest first.
_COTANGENT_TRAITS = tuple(itertools.product(COTANGENT_RECIPES, COTANGENT_LAYOUTS))
#: What a rank holds besides its shape and seed: (layout, values, cotangent, cotangent_layout),
#: in two choices.  Few on purpose: Hypothesis's shrinker deletes a list element only while
#: it spans few choices (measured with this Hypothesis: a rank of 5 choices -- list flag,
#: two for the length, these two -- shrinks; 6 or more do not), and deleting ranks is how a
#: case shrinks ``(0,), (0,), (2,) strided`` to ``(2,) strided``.  The seed is drawn once
#: per case for the same reason; the recipes mix in the rank, so ranks still differ.
RankTraits = tuple[str, str, str, str]


def _rank_traits(values: tuple[str, ...]) -> st.SearchStrategy[RankTraits]:
    """(layout, values) and (cotangent, cotangent_layout) combinations, simplest first."""
    inputs = tuple(itertools.product(LAYOUTS, values))
    return st.tuples(st.sampled_from(inputs), st.sampled_from(_COTANGENT_TRAITS)).map(lambda drawn: drawn[0] + drawn[1])


_RANK_TRAITS = _rank_traits(VALUE_RECIPES)


def _rank_spec(shape: tuple[int, ...], traits: RankTraits, seed: int) -> RankSpec:
    layout, values, cotangent, cotangent_layout = traits
    return RankSpec(shape, layout=layout, values=values, seed=seed, cotangent=cotangent,
                    cotangent_layout=cotangent_layout)


def _rank_specs(shape: tuple[int, ...]) -> st.SearchStrategy[RankSpec]:
    return st.tuples(_RANK_TRAITS, _SEEDS).map(lambda drawn: _rank_spec(shape, *drawn))


def _drop_unread(spec: RankSpec, grad: str) -> RankSpec:
    """``spec`` with the fields a case never reads reset, so cases print and store cleanly.

    Rank specs always draw every field: then every dtype costs the same choices and a
    failing case shrinks along the dtype order, not toward dtypes without gradients.
    """
    if grad != "none":
        return spec
    seed = spec.seed if spec.values in _SEEDED_VALUES else 0
    return RankSpec(spec.shape, layout=spec.layout, values=spec.values, seed=seed)


# ---------------------------------------------------------------------------------------------
# cases


def cases(
    *,
    contract: Contract,
    dtypes: tuple[str, ...] | None = None,
    backend: str = "gloo",
    device: str = "cpu",
    max_length: int = 300,
    max_elements: int = 4096,
    values: tuple[str, ...] | None = None,
    long_rank: bool = False,
    min_ndim: int = 1,
    like: Like | None = None,
) -> st.SearchStrategy[Case]:
    """In-contract cases for a variant with ``contract``.

    - ``contract``: the variant's :class:`~harness.core.contract.Contract`; its ``world_sizes``,
      ``ragged``, ``dims`` and ``ndims`` shape the draws (a re-layout's: its gather dim, and a
      scatter dim chosen per case, :func:`as_collective`), its ``grad`` becomes ``case.grad``, its
      ``output`` becomes ``case.output`` (``auto`` reads as ``tensor``; ``stack`` also draws
      0-d inputs), and with ``groups`` every case also draws a group layout; with
      ``optional_group`` every case draws whether the target is given a group at all (then
      its layout, or without ``groups`` the world group, ``case.world_group``).
    - ``dtypes`` (default None: ``contract.dtypes``): the dtype names to draw; pass the
      contract's dtypes already intersected with what the backend really supports.
    - ``backend`` (default ``"gloo"``), ``device`` (default ``"cpu"``): copied into the case.
    - ``max_length`` (default 300), ``max_elements`` (default 4096): as in :func:`ragged_shapes`.
    - ``values`` (default None: every recipe of the contract's collective, :func:`recipes_for`):
      the value recipes ranks draw from.
    - ``long_rank`` (default False): 1-d cases in which some rank holds at least
      :data:`~harness.strategies.space.LONG_LENGTH` elements (shrinking keeps one that long).
    - ``min_ndim`` (default 1, at most 4): cases of at least this many dims; 2 or more is where
      input and cotangent layouts differ from a contiguous one (a transposed 1-d tensor is one).
    - ``like`` (default None): cases held to a :class:`Like`'s raggedness, zero-size dim and
      group layout (a failing stratum's path), at its fewest ranks or more.

    ``case.grad`` is ``"none"`` for dtypes without gradients (ints, bool).  Every rank draws
    its own layout, value recipe and cotangent recipe; cotangents differ on every rank even
    with one recipe, as ``make_cotangent`` mixes in the rank.  Examples shrink toward one
    rank holding ``(0,)`` of the simplest dtype given, e.g.
    ``Case(ranks=(RankSpec(shape=(0,)),), dtype='float32', grad=contract.grad)``.
    """
    _check_contract(contract)
    names = contract.dtypes if dtypes is None else check_names("dtypes", dtypes, ALL_DTYPES)
    ragged = contract.ragged_cases
    check_int("min_ndim", min_ndim, at_least=1, at_most=1 if long_rank else _NDIM[1], example=2)
    low, high = contract.world_sizes
    if like is not None:
        low, min_ndim = min(max(low, like.fewest_ranks()), high), max(min_ndim, 2 if like.zero_size_dim else 1)
    fewest, most = contract.ndim_range or _NDIM
    ndims = (1, 1) if long_rank else (min(max(min_ndim, fewest), most), most)
    shape_args = _shape_args((low, high), ragged, ndims, contract.drawn_dims, max_length, max_elements)
    values = recipes_for(contract) if values is None else check_names("values", values, ALL_RECIPES)
    traits = _RANK_TRAITS if values == VALUE_RECIPES else _rank_traits(values)
    shapes = _ragged_shapes(*shape_args, traits, like)
    if long_rank:
        shapes = shapes.map(lambda drawn: (_with_a_long_rank(drawn[0], ragged), drawn[1]))
    return _as_drawn(_cases(shapes, simplest_first(names), contract.grad, *_check_target(backend, device),
                            output=contract.read_as.name, groups=contract.groups, mesh=contract.mesh,
                            optional_group=contract.optional_group and not contract.mesh,
                            group_kind=like.groups if like is not None else None),
                     contract.with_(ragged=False) if like is not None and like.raggedness in _EQUAL else contract)


def recipes_for(contract: Contract) -> tuple[str, ...]:
    """The value recipes a contract's cases draw (:func:`harness.core.case.recipes_for`)."""
    return case_recipes(contract.kind.reduces, contract.op)


def as_collective(case: Case, contract: Contract) -> Case:
    """A case drawn as a gather's, made the contract's collective: a gather's per-rank lengths
    are a reduce-scatter's slots as they are; in an all-to-all each rank sends its length split
    over its group's members (:func:`_sends`)."""
    ranks = case.ranks
    if contract.relayout:
        return _relaid(case, contract)
    if contract.collective == "all-to-all":
        ranks = tuple(_sends(case, r, contract.ragged_cases) for r in range(case.world_size))
    return dataclasses.replace(case, ranks=ranks, collective=contract.collective, op=contract.op)


def _relaid(case: Case, contract: Contract) -> Case:
    """A gather-shaped case as a re-layout's: its dim (where ranks differ) is the gather dim, a
    scatter dim is chosen from rank 0's seed among the others (:meth:`Contract.scatter_dims`), and
    every member of a group sends each member a piece of it as ``torch.tensor_split`` cuts it
    (the first ``H % G`` members one row more); equal-only, its length H is rounded up to a multiple
    of every group's size.  Derived, not drawn, as :func:`_sends` is."""
    choices = contract.scatter_dims(case.ndim, case.dim)
    scatter = choices[random.Random(f"{case.ranks[0].seed}:scatter").randrange(len(choices))]
    axis = scatter % case.ndim
    height = case.ranks[0].shape[axis]
    if not contract.ragged_cases:
        every = math.lcm(*(len(group) for group in case.layout()))
        height = -(-height // every) * every
    ranks = []
    for r, spec in enumerate(case.ranks):
        shape = list(spec.shape)
        shape[axis] = height
        g = len(case.members(r))
        splits = tuple(height // g + (k < height % g) for k in range(g)) if g else ()
        ranks.append(dataclasses.replace(spec, shape=tuple(shape), splits=splits))
    return dataclasses.replace(case, ranks=tuple(ranks), collective=contract.collective, scatter_dim=scatter)


def _sends(case: Case, rank: int, ragged: bool) -> RankSpec:
    """Rank ``rank``'s all-to-all spec: ragged, its length cut at G-1 points drawn from its seed
    (zero-length splits wherever points meet; a rank of length 0 sends nothing); equal, the
    length rounded up to G chunks of one size.  Derived, not drawn: a rank stays a few choices
    for the shrinker (:data:`_RANK_TRAITS`), and a shorter length gives smaller splits."""
    spec = case.ranks[rank]
    members = case.members(rank)
    if not members:
        return spec
    n, g = case.lengths[rank], len(members)
    if ragged:
        rng = random.Random(f"{spec.seed}:{rank}")
        cuts = sorted(rng.randint(0, n) for _ in range(g - 1))
        return dataclasses.replace(spec, splits=tuple(b - a for a, b in zip([0, *cuts], [*cuts, n])))
    chunk = -(-n // g)
    shape = list(spec.shape)
    shape[case.dim % case.ndim] = chunk * g
    return dataclasses.replace(spec, shape=tuple(shape), splits=(chunk,) * g)


def _with_a_long_rank(drawn: RaggedShapes, ragged: bool) -> RaggedShapes:
    """``drawn`` (1-d) with its longest rank, or every rank if equal-only, at least LONG_LENGTH long."""
    lengths = [shape[0] for shape in drawn.shapes]
    longest = lengths.index(max(lengths))
    grown = [max(n, LONG_LENGTH) if (r == longest or not ragged) else n for r, n in enumerate(lengths)]
    return RaggedShapes(shapes=tuple((n,) for n in grown), dim=drawn.dim)


def _check_contract(contract: object) -> None:
    if not isinstance(contract, Contract):
        raise UsageError(
            f"contract={contract!r} should be a harness.core.contract.Contract, e.g. contract=Contract(grad='sum')"
        )


def _check_target(backend: object, device: object) -> tuple[str, str]:
    return check_choice("backend", backend, BACKENDS), check_choice("device", device, DEVICES)


@_composite_named("cases")
def _cases(
    draw: st.DrawFn,
    shapes_and_traits: st.SearchStrategy[tuple[RaggedShapes, tuple[RankTraits, ...]]],
    names: tuple[str, ...],
    grad: str,
    backend: str,
    device: str,
    output: str = "tensor",
    groups: bool = False,
    mesh: bool = False,
    optional_group: bool = False,
    group_kind: str | None = None,
) -> Case:
    drawn, traits = draw(shapes_and_traits)
    dtype = draw(_one_of(names))
    seed = draw(_SEEDS)
    grad = grad if dtype in DIFFERENTIABLE_DTYPES else "none"
    shapes, dim = drawn.shapes, drawn.dim
    if OUTPUTS[output].stacked and draw(_SCALARS):
        shapes, dim = tuple(() for _ in shapes), 0
    # An optional group is passed or not (shrinking toward not); passed, it is a layout with groups.
    passes = not optional_group or (group_kind != "world" if group_kind else draw(st.booleans()))
    if group_kind and not mesh:
        layout = group_layout(group_kind, len(shapes)) if groups else ()
    elif mesh:
        layout = _mesh_layout(len(shapes), *draw(_mesh_choice(len(shapes))))
    else:
        layout = _group_layout(draw(_group_labels(len(shapes)))) if groups and passes else ()
    ranks = tuple(_drop_unread(_rank_spec(shape, trait, seed), grad) for shape, trait in zip(shapes, traits))
    world_group = optional_group and passes and not groups
    return Case(ranks=ranks, dim=dim, dtype=dtype, grad=grad, backend=backend, device=device, groups=layout,
                output=output, world_group=world_group)


#: For ``stack`` results, about one case in five has 0-d inputs (a stack of scalars).
_SCALARS = st.integers(0, 4).map(lambda k: k == 4)


@functools.cache
def _group_labels(world: int) -> st.SearchStrategy[list[int]]:
    """One label per rank: 0..W-1 name a group, W leaves the rank idle; all 0 is the world."""
    return st.lists(st.integers(0, world), min_size=world, max_size=world)


@functools.cache
def _mesh_choice(world: int) -> st.SearchStrategy[tuple[int, bool]]:
    """A group size n dividing W (largest first, so shrinking goes toward one group: the world)
    and whether the groups are a mesh's columns (strided) rather than its rows (contiguous)."""
    sizes = [n for n in range(world, 0, -1) if world % n == 0]
    return st.tuples(st.sampled_from(sizes), st.booleans())


def _mesh_layout(world: int, size: int, columns: bool) -> tuple[tuple[int, ...], ...]:
    """The groups of one dimension of a 2-D mesh over ``world`` ranks, ``size`` ranks each."""
    count = world // size
    if columns:
        return tuple(tuple(range(c, world, count)) for c in range(count))
    return tuple(tuple(range(k * size, (k + 1) * size)) for k in range(count))


def _group_layout(labels: list[int]) -> tuple[tuple[int, ...], ...]:
    """Labels as disjoint groups ordered by their first rank; everyone idle counts as the world.

    Shrinking moves labels toward 0, so a failing layout shrinks toward the world group.
    """
    world = len(labels)
    members: dict[int, list[int]] = {}
    for rank, label in enumerate(labels):
        if label < world:
            members.setdefault(label, []).append(rank)
    groups = sorted(tuple(ranks) for ranks in members.values())
    return tuple(groups) or (tuple(range(world)),)


def _as_drawn(drawn: st.SearchStrategy[Case], contract: Contract) -> st.SearchStrategy[Case]:
    """Gather-shaped cases as the contract's collective draws them (:func:`as_collective`)."""
    return drawn if contract.collective == "gather" else drawn.map(functools.partial(as_collective, contract=contract))
