"""The space of cases: the axes a case is told apart on, and which of their values can go together.

The strategies draw within it (their strata cover every pair of :data:`PAIR_AXES` values that
:func:`allowed` lets hold together), and the coverage counts of a run
(:class:`harness.search.coverage.Coverage`) are kept along the same axes (:func:`axes`), so a schedule,
a count and a page always agree on what an axis is.  The same :func:`axes` gives the
``hypothesis.event()`` labels (:func:`events`).

The axis rules (:data:`AXES` says each in one line, for the page):

- A *per-case* axis takes one value per case: W, dtype, ndim, dim (as drawn, negative ones
  kept apart: ``-1`` is not ``1``), raggedness, group layout, output convention, long rank.
- A *per-rank* axis (input layout, value class, cotangent recipe and layout) counts a case
  once under every value its active ranks hold: a case with a contiguous and an offset rank
  counts under both, so "was an offset view ever gathered?" reads straight off the count.
  Counts of a per-rank axis may therefore add up to more than the examples.
- Idle ranks (in no group) gather nothing, so they count on no axis but the group layout.
- Raggedness is one value, the first of these that holds: ``all empty`` (no active rank
  holds an element), ``zero-length rank`` (some active rank has length 0 along dim),
  ``ragged`` (lengths differ within a group), ``equal``.
- Cotangent axes count only cases with gradients (``grad != "none"``).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self

from harness.core.case import COTANGENT_LAYOUTS, COTANGENT_RECIPES, LAYOUTS, VALUE_RECIPES, Case, recipes_for
from harness.core.contract import ALL_DTYPES, DIFFERENTIABLE_DTYPES, NDIMS, Contract
from harness.core.outputs import OUTPUTS

#: A rank at least this long along the gather dim counts as long (lengths past a byte).
LONG_LENGTH = 256


RAGGEDNESS: tuple[str, ...] = ("one rank", "equal", "ragged", "zero-length rank", "all empty")


GROUP_LAYOUTS: tuple[str, ...] = ("world", "one group", "several groups", "idle ranks", "interleaved groups")


#: Ranks holding different layouts count under each layout and under this one too.
MIXED = "mixed"


#: An activation's hidden size: the last dim besides the gather dim is at least this long.
HIDDEN = 16


#: Every axis, in display order, with the rule that counts it (one line, shown on the page).
AXES: dict[str, str] = {
    "W": "world size",
    "dtype": "input dtype",
    "ndim": "dims of each input",
    "dim": "gather dim as passed; negative dims kept apart",
    "dim kind": "the gather dim: 0, a later one (positive) or counted from the end (negative)",
    "raggedness": "lengths along dim of the active ranks; the first that holds of: all empty, one rank, "
                  "zero-length rank, ragged, equal",
    "zero-size dim": "some dim other than the gather dim has size 0",
    "long rank": f"some rank is >= {LONG_LENGTH} long along dim",
    "activation": f"3-d or more, every other dim > 1 and the last of them >= {HIDDEN} (batch x ... x hidden)",
    "layout": "input layout; per rank: a case counts under each layout its ranks hold, and mixed if they differ",
    "values": "value class; per rank: a case counts under each class its ranks hold",
    "groups": "world: no group passed; idle ranks: some rank in no group; interleaved: a group of "
              "non-consecutive ranks (both also counted as one/several)",
    "output": "how the result reads",
    "cotangent": "cotangent recipe; cases with gradients only; per rank",
    "cotangent layout": "cotangent layout; cases with gradients only; per rank, and mixed if they differ",
}


#: The axes a gather's code branches on: the strata cover every pair of their values
#: (``strategies.strata``) and :meth:`harness.search.coverage.Coverage.pairs_missing` names any pair a run did not reach.
PAIR_AXES: tuple[str, ...] = ("W", "dtype", "ndim", "dim kind", "raggedness", "zero-size dim", "long rank",
                              "activation", "layout", "values", "groups", "cotangent layout")


#: Axes whose every triple of values is covered too: a fast path is taken for equal lengths
#: (of two ranks or more), at a dim that is not 0, when no other dim is empty -- three at once.
TRIPLE_AXES: tuple[str, ...] = ("raggedness", "dim kind", "zero-size dim")


DIM_KINDS: tuple[str, ...] = ("0", "positive", "negative")


#: The order values of an axis are shown in; axes not named here hold integers, shown in order.
_ORDER: dict[str, tuple[str, ...]] = {
    "dtype": ALL_DTYPES,
    "raggedness": RAGGEDNESS,
    "dim kind": DIM_KINDS,
    "zero-size dim": ("no", "yes"),
    "long rank": ("no", "yes"),
    "activation": ("no", "yes"),
    "layout": (*LAYOUTS, MIXED),
    "values": (*VALUE_RECIPES, "normal"),
    "groups": GROUP_LAYOUTS,
    "output": tuple(OUTPUTS),
    "cotangent": COTANGENT_RECIPES,
    "cotangent layout": (*COTANGENT_LAYOUTS, MIXED),
}


def dim_kind(dim: int) -> str:
    """The ``dim kind`` of a dim as passed: ``0``, ``positive`` or ``negative``."""
    return "0" if dim == 0 else "positive" if dim > 0 else "negative"


def axes(case: Case) -> dict[str, tuple[str, ...]]:
    """The value(s) ``case`` takes on every axis, in :data:`AXES` order (see the module docstring).

    E.g. ``{"W": ("2",), "dtype": ("float16",), ..., "layout": ("contiguous", "offset"), ...}``;
    the cotangent axes are absent for a case without gradients.
    """
    active = [r for r in range(case.world_size) if not case.idle(r)]
    specs = [case.ranks[r] for r in active]
    others = [n for d, n in enumerate(case.ranks[0].shape) if d != case.dim % max(case.ndim, 1)]
    activation = case.ndim >= 3 and min(others) > 1 and others[-1] >= HIDDEN
    found = {
        "W": (str(case.world_size),),
        "dtype": (case.dtype,),
        "ndim": (str(case.ndim),),
        "dim": (str(case.dim),),
        "dim kind": (dim_kind(case.dim),),
        "raggedness": (_raggedness(case, active),),
        "zero-size dim": ("yes" if 0 in others else "no",),
        "long rank": ("yes" if any(case.lengths[r] >= LONG_LENGTH for r in active) else "no",),
        "activation": ("yes" if activation else "no",),
        "layout": _held("layout", (spec.layout for spec in specs)),
        "values": _held("values", (spec.values for spec in specs)),
        "groups": _group_layout(case),
        "output": (case.output,),
    }
    if case.grad != "none":
        found["cotangent"] = _held("cotangent", (spec.cotangent for spec in specs))
        found["cotangent layout"] = _held("cotangent layout", (spec.cotangent_layout for spec in specs))
    return found


def events(case: Case) -> list[str]:
    """``hypothesis.event()`` labels for ``case``, one per axis value: ``W=2``, ``dim=-1``, ``layout=offset``."""
    return [f"{axis}={value}" for axis, values in axes(case).items() for value in values]


def _raggedness(case: Case, active: list[int]) -> str:
    if not any(case.lengths[r] for r in active):
        return "all empty"
    if len(active) == 1:
        return "one rank"
    if any(case.lengths[r] == 0 for r in active):
        return "zero-length rank"
    return "ragged" if case.is_ragged else "equal"


def _group_layout(case: Case) -> tuple[str, ...]:
    if not case.groups:
        return ("world",)
    layout: tuple[str, ...] = ("one group",) if len(case.groups) == 1 else ("several groups",)
    layout += ("idle ranks",) if any(case.idle(r) for r in range(case.world_size)) else ()
    return layout + (("interleaved groups",) if any(g[-1] - g[0] >= len(g) for g in case.groups) else ())


def _held(axis: str, values: Iterable[str]) -> tuple[str, ...]:
    """The distinct values the ranks hold on a per-rank axis, in display order; ``mixed`` too
    when they differ, on the layout axes."""
    held = set(values)
    mixed = {MIXED} if len(held) > 1 and axis in ("layout", "cotangent layout") else set()
    return tuple(ordered(axis, held | mixed))


def ordered(axis: str, values: Iterable[str]) -> list[str]:
    """``values`` of ``axis`` in display order: the axis's known order, integers numerically."""
    return sorted(values, key=lambda value: place(axis, value))


def place(axis: str, value: str) -> tuple[int, str]:
    """Sort key of one value: its index in the axis's order (or its integer), unknown values last."""
    known = _ORDER.get(axis)
    if known is None:
        return int(value), ""
    return (known.index(value), "") if value in known else (len(known), value)


@functools.lru_cache(maxsize=1 << 16)
def pair_label(*axis_values: tuple[str, str]) -> str:
    """A pair (or triple) as shown and stored: ``W=2 x dtype=int8`` (axes in :data:`PAIR_AXES` order).
    Cached: the schedule names the same few thousand pairs hundreds of thousands of times."""
    return " x ".join(f"{axis}={value}" for axis, value in axis_values)


def interactions(row: dict[str, tuple[str, ...]], involving: str | None = None) -> set[str]:
    """The pairs of values ``row`` holds (every value of a per-rank axis counts), and the
    triples of :data:`TRIPLE_AXES`; axes in :data:`PAIR_AXES` order.  ``involving``: only
    those with a value of that axis (what giving it a value adds to a row)."""
    held = [(axis, row[axis]) for axis in PAIR_AXES if axis in row]
    found = {pair_label((a, x), (b, y)) for (a, xs), (b, ys) in itertools.combinations(held, 2)
             if involving in (None, a, b) for x in xs for y in ys}
    if all(axis in row for axis in TRIPLE_AXES) and involving in (None, *TRIPLE_AXES):
        found |= {pair_label(*zip(TRIPLE_AXES, values)) for values in itertools.product(*(row[a] for a in TRIPLE_AXES))}
    return found


def pair_place(label: str) -> tuple:
    parts = [part.split("=", 1) for part in label.split(" x ")]
    return tuple(key for axis, value in parts for key in (PAIR_AXES.index(axis), place(axis, value)))


def allowed(row: dict[str, str]) -> bool:
    """Whether values of :data:`PAIR_AXES` (some axes, or all) can hold in one case.

    The rules the case strategies obey: a 1-d case has no later dim, no other dim to be
    empty, no transposed view; a long rank is 1-d, an activation 3-d or more, neither empty;
    a single rank is neither ragged nor mixed and gathers in one group; with two ranks, groups
    cannot interleave, an idle rank leaves one active rank, and two one-rank groups cannot be
    ragged within a group; integer and bool dtypes have no cotangent; a case without elements
    holds no value class but the first (``iota``: there is nothing to hold).
    """
    get = row.get
    world = int(get("W", 0)) or None
    ndim = int(get("ndim", 0)) or None
    empty = get("raggedness") == "all empty"
    one_active = world == 1 or (world == 2 and get("groups") == "idle ranks")
    no_elements = empty or get("zero-size dim") == "yes"
    rules = (
        ndim == 1 and (get("dim kind") == "positive" or get("zero-size dim") == "yes" or get("activation") == "yes"
                       or "transposed" in (get("layout"), get("cotangent layout"))),
        get("long rank") == "yes" and (empty or (ndim or 1) != 1),
        get("activation") == "yes" and (empty or (ndim or 3) < 3 or get("zero-size dim") == "yes"),
        one_active and (get("raggedness") in ("equal", "ragged", "zero-length rank")
                        or MIXED in (get("layout"), get("cotangent layout"))),
        world is not None and not one_active and get("raggedness") == "one rank",
        no_elements and get("values") not in (None, "iota"),
        world == 1 and get("groups") not in (None, "world", "one group"),
        world == 2 and (get("groups") == "interleaved groups"
                        or (get("groups") == "several groups" and get("raggedness") == "ragged")),
        "cotangent layout" in row and get("dtype", "float32") not in DIFFERENTIABLE_DTYPES,
    )
    return not any(rules)


def completable(row: dict[str, str], domain: dict[str, tuple[str, ...]]) -> bool:
    """Whether ``row`` can be given a value on every other axis of ``domain`` (the cotangent
    axis stays empty for a dtype without gradients) with every rule still holding."""
    return completion(row, domain) is not None


def needs_value(axis: str, row: dict[str, str]) -> bool:
    """Whether a full row gives ``axis`` a value: every axis but the cotangent's of a dtype without gradients."""
    return axis != "cotangent layout" or row.get("dtype", "float32") in DIFFERENTIABLE_DTYPES


def completion(row: dict[str, str], domain: dict[str, tuple[str, ...]]) -> dict[str, str] | None:
    """``row`` given a value on every other axis of ``domain`` (the first that works, in the
    domain's order), or ``None`` where :func:`completable` says no: a witness, so that a caller
    growing a row can ask :func:`allowed` of it with one value changed before searching again."""
    if not allowed(row):
        return None
    axis = next((a for a in domain if a not in row), None)
    if axis is None:
        return row
    if not needs_value(axis, row):
        return completion(row, {a: v for a, v in domain.items() if a != axis})
    return next((found for value in domain[axis] if (found := completion({**row, axis: value}, domain)) is not None),
                None)


def possible_pairs(domain: dict[str, tuple[str, ...]]) -> frozenset[str]:
    """Every pair (and :data:`TRIPLE_AXES` triple) of values of ``domain`` some full row holds
    (:func:`completable`)."""
    return _possible_pairs(tuple(domain.items()))


@functools.cache
def _possible_pairs(domain_items: tuple[tuple[str, tuple[str, ...]], ...]) -> frozenset[str]:
    domain = dict(domain_items)
    combos: list[tuple[str, ...]] = list(itertools.combinations(domain, 2))
    if all(axis in domain for axis in TRIPLE_AXES):
        combos.append(TRIPLE_AXES)
    return frozenset(pair_label(*zip(combo, values)) for combo in combos
                     for values in itertools.product(*(domain[a] for a in combo))
                     if completable(dict(zip(combo, values)), domain))


@dataclass
class Space:
    """What a run's strategies can draw, axis by axis.

    - ``world_sizes``: the (low, high) range of W; ``dtypes``: the dtype names drawn (after
      the backend's capabilities).  Every cell of W x dtypes is reachable.
    - ``grad``: gradients are checked, so the cotangent axes are reachable (with a float or
      complex dtype among ``dtypes``).
    - ``groups``: every case draws a group layout (``--groups``); without, every case is ``world``.
    - ``ragged`` (default True), ``dims`` (``"any"`` default, ``"0"``, or a re-layout's one gather dim), ``ndims`` (default
      ``(1, 4)``): the shapes drawn; an equal-only or dim-0 run is not blamed for missing
      ragged cases or dim -1.
    - ``values``: the value recipes drawn (a reduction's are fewer); ``group_optional``: a case
      may pass no group (``world`` on the groups axis); ``mesh``: the layouts are a mesh's
      (no idle rank).

    :meth:`for_contract` derives all of it from the contract the cases are drawn for.
    """


    world_sizes: tuple[int, int] = (1, 4)
    dtypes: tuple[str, ...] = ALL_DTYPES
    grad: bool = False
    groups: bool = False
    ragged: bool = True
    dims: str = "any"
    ndims: tuple[int, int] = NDIMS
    values: tuple[str, ...] = VALUE_RECIPES
    group_optional: bool = False
    mesh: bool = False

    @classmethod
    def for_contract(cls, contract: Contract, dtypes: tuple[str, ...] | None = None) -> Self:
        """The space of ``strategies.cases(contract=contract, dtypes=dtypes)``: a ``stack``
        convention draws equal shapes only, 0-d ones included."""
        stack = contract.read_as.stacked  # the one convention that reads 0-d inputs
        return cls(world_sizes=contract.world_sizes, dtypes=dtypes or contract.dtypes, grad=contract.grad != "none",
                   groups=bool(contract.groups), ragged=contract.ragged_cases,
                   dims=contract.drawn_dims, ndims=_drawn_ndims(contract, stack),
                   values=recipes_for(contract.kind.reduces, contract.op),
                   group_optional=contract.optional_group and not contract.mesh, mesh=contract.mesh)

    def in_space(self, world_size: int, dtype: str) -> bool:
        """Whether the run could draw this cell (a merged or hand-fed run may record others)."""
        return self.world_sizes[0] <= world_size <= self.world_sizes[1] and dtype in self.dtypes

    def expected(self) -> dict[str, tuple[str, ...]]:
        """Per axis, the values the space can reach (axes without a list are not judged)."""
        several = self.world_sizes[1] >= 2  # ragged lengths, several groups, idle ranks need two ranks
        low, high = self.ndims
        found = {
            "ndim": tuple(str(n) for n in range(low, high + 1)),
            "dim": tuple(str(d) for d in range(-high, high)) if self.dims == "any" else (self.dims,),
            "dim kind": DIM_KINDS if self.dims == "any" else (dim_kind(int(self.dims)),),
            "raggedness": tuple(v for v in RAGGEDNESS if v in ("one rank", "all empty") or several
                                and (self.ragged or v == "equal")),
            "zero-size dim": ("no", "yes") if high >= 2 else ("no",),
            "long rank": ("no", "yes") if low <= 1 else ("no",),
            "activation": ("no", "yes") if high >= 3 else ("no",),
            "layout": (*LAYOUTS, MIXED) if several else LAYOUTS,
            "values": self.values,
            "groups": self._group_layouts(several) if self.groups else ("world",),
        }
        if self.grad and any(dtype in DIFFERENTIABLE_DTYPES for dtype in self.dtypes):
            found["cotangent"] = COTANGENT_RECIPES
            found["cotangent layout"] = (*COTANGENT_LAYOUTS, MIXED) if several else COTANGENT_LAYOUTS
        return found

    def _group_layouts(self, several: bool) -> tuple[str, ...]:
        """The group layouts the space draws: a mesh's have no idle rank, an optional group may be left out."""
        return tuple(v for v in GROUP_LAYOUTS if (v != "world" or self.group_optional)
                     and (several or v in ("world", "one group"))
                     and (v != "interleaved groups" or self.world_sizes[1] >= 3)
                     and (v != "idle ranks" or not self.mesh))

    def domain(self) -> dict[str, tuple[str, ...]]:
        """The values of every :data:`PAIR_AXES` axis the space reaches by design: 1-d to 4-d
        (0-d stacks are drawn, not designed), the groups axis only with ``groups``."""
        lo, hi = self.world_sizes
        expected = self.expected()
        found = {"W": tuple(str(w) for w in range(lo, hi + 1)), "dtype": tuple(ordered("dtype", self.dtypes)),
                 "ndim": tuple(n for n in expected["ndim"] if n != "0")}
        found |= {axis: expected[axis] for axis in PAIR_AXES if axis in expected and axis not in found}
        if not self.groups or self.mesh:  # a mesh's layouts are drawn (its rows or columns), not designed
            found.pop("groups", None)
        return found

    def possible_pairs(self) -> frozenset[str]:
        """Every pair of :meth:`domain` values some case can hold together (:func:`allowed`)."""
        return possible_pairs(self.domain())


def _drawn_ndims(contract: Contract, stack: bool) -> tuple[int, int]:
    """The dims of the inputs ``contract``'s cases draw; a ``stack`` convention adds 0-d ones."""
    low, high = contract.ndim_range or NDIMS
    return (0 if stack else low), high


__all__ = ["Space", "AXES", "DIM_KINDS", "GROUP_LAYOUTS", "HIDDEN", "LONG_LENGTH", "MIXED", "PAIR_AXES", "RAGGEDNESS",
           "TRIPLE_AXES", "allowed", "axes", "completable", "completion", "dim_kind", "events", "interactions",
           "needs_value", "ordered", "pair_label", "pair_place", "place", "possible_pairs"]
