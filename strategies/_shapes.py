"""The strategies of a case's geometry: world sizes, per-rank lengths, ragged shapes, group layouts.

A case draws its per-rank lengths first, as one list whose size *is* the world size, so the
shrinker removes whole ranks; then its other dims (a list too) and the dim.  Sizes shrink
toward 0 and the smallest world.  Cases, dtypes and rank specs build on these
(:mod:`harness.strategies._internal`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from harness.strategies._validation import (
    check_bool,
    check_choice,
    check_int,
    check_interval,
    check_min_max,
)
from harness.strategies.space import allowed
from hypothesis import strategies as st

from harness.core.contract import MAX_WORLD_SIZE as CONTRACT_MAX_WORLD_SIZE
from harness.core.errors import UsageError

__all__ = ["MAX_WORLD_SIZE", "Like", "RaggedShapes", "group_layout", "lengths", "ragged_shapes", "world_sizes"]


#: The most ranks a case may have (``harness.core.contract.MAX_WORLD_SIZE``).
MAX_WORLD_SIZE = CONTRACT_MAX_WORLD_SIZE



#: Lengths up to this are "short": the branch drawn half the time and shrunk toward.
_SHORT = 4



#: Sizes of the dims other than the gather dim: 1..4, shrinking to 1 ...
_OFF_DIM_SIZES = st.integers(1, 4)



#: ... and about one multi-dim case in ten has one of them 0 (more would empty most cases).
_ZERO_AN_OFF_DIM = st.integers(0, 9).map(lambda k: k == 9)



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
    the shrinker to delete whole ranks (see :data:`harness.strategies._internal._RANK_TRAITS`).
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
