"""What a run tested: examples and failures per world size x dtype, and per value of every other axis.

"No counterexample in 100 examples" says nothing about *which* 100.  :func:`axes` names, for
one case, the value it takes on every axis the strategies draw; :class:`Coverage` counts
examples and failing examples per W x dtype cell and per axis value, knows which values the
run *could* have reached (its space), and so names the ones it never did.  The same
:func:`axes` gives the ``hypothesis.event()`` labels (:func:`events`), so statistics,
terminal summary and page always agree on what an axis is.

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

Everything here is plain data: :meth:`Coverage.to_json` / :meth:`Coverage.from_json`
round-trip, and :meth:`Coverage.merge` adds two runs (fuzzing several targets) up.

One concern, the space of cases and what a run reached of it: the counts (:class:`Coverage`) and
the pairs the strata schedule (:func:`allowed`, :func:`possible_pairs`) share one definition of an axis.
"""

from __future__ import annotations

import functools
import itertools
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.case import COTANGENT_LAYOUTS, COTANGENT_RECIPES, LAYOUTS, VALUE_RECIPES, Case, recipes_for
from harness.contract import ALL_DTYPES, DIFFERENTIABLE_DTYPES, NDIMS, Contract
from harness.outputs import OUTPUTS

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
#: (``strategies.strata``) and :meth:`Coverage.pairs_missing` names any pair a run did not reach.
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
#: Short dtype names for the terminal matrix, which must fit 80 columns with 12 dtypes.
SHORT_DTYPES: dict[str, str] = {
    "bool": "bool", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128",
}


# ---------------------------------------------------------------------------------------------
# one case


def dim_kind(dim: int) -> str:
    """The ``dim kind`` of a dim as passed: ``0``, ``positive`` or ``negative``."""
    return "0" if dim == 0 else "positive" if dim > 0 else "negative"


def _drawn_ndims(contract: Contract, stack: bool) -> tuple[int, int]:
    """The dims of the inputs ``contract``'s cases draw; a ``stack`` convention adds 0-d ones."""
    low, high = contract.ndim_range or NDIMS
    return (0 if stack else low), high


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
    return sorted(values, key=lambda value: _place(axis, value))


def _place(axis: str, value: str) -> tuple[int, str]:
    """Sort key of one value: its index in the axis's order (or its integer), unknown values last."""
    known = _ORDER.get(axis)
    if known is None:
        return int(value), ""
    return (known.index(value), "") if value in known else (len(known), value)


# ---------------------------------------------------------------------------------------------
# counts


@dataclass
class Tally:
    """The examples of one matrix cell or axis value, and its failing ones by the property they broke."""

    examples: int = 0
    failed: dict[str, int] = field(default_factory=dict)

    @property
    def failures(self) -> int:
        return sum(self.failed.values())

    def add(self, failed: str | None) -> None:
        self.examples += 1
        if failed is not None:
            self.failed[failed] = self.failed.get(failed, 0) + 1

    def plus(self, other: Tally) -> Tally:
        failed = dict(self.failed)
        for prop, n in other.failed.items():
            failed[prop] = failed.get(prop, 0) + n
        return Tally(self.examples + other.examples, failed)

    def to_json(self) -> dict:
        return {"examples": self.examples, "failed": dict(sorted(self.failed.items()))}

    @classmethod
    def from_json(cls, data: dict) -> Tally:
        return cls(int(data["examples"]), {str(prop): int(n) for prop, n in data["failed"].items()})


@dataclass
class Coverage:
    """Examples and failures per W x dtype cell and per axis value, within a known space.

    The space is what the run's strategies could draw, so that :meth:`never_reached` can name
    what they did not:

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
    cells: dict[tuple[int, str], Tally] = field(default_factory=dict)
    by_axis: dict[str, dict[str, Tally]] = field(default_factory=dict)
    #: Pairs of :data:`PAIR_AXES` values some example took together, as :func:`pair_label` names them.
    pairs: set[str] = field(default_factory=set)
    #: A merged run's possible pairs: those of each run merged, not of the union of their spaces
    #: (a gather's bool and a reduction's ``normal`` values never meet); ``None``: the space's own.
    merged_possible: frozenset[str] | None = None

    @classmethod
    def for_contract(cls, contract: Contract, dtypes: tuple[str, ...] | None = None) -> Coverage:
        """The space of ``strategies.cases(contract=contract, dtypes=dtypes)``: a ``stack``
        convention draws equal shapes only, 0-d ones included."""
        stack = contract.read_as.stacked  # the one convention that reads 0-d inputs
        return cls(world_sizes=contract.world_sizes, dtypes=dtypes or contract.dtypes, grad=contract.grad != "none",
                   groups=bool(contract.groups), ragged=contract.ragged_cases,
                   dims=contract.drawn_dims, ndims=_drawn_ndims(contract, stack),
                   values=recipes_for(contract.kind.reduces, contract.op),
                   group_optional=contract.optional_group and not contract.mesh, mesh=contract.mesh)

    def record(self, case: Case, failed: str | None = None) -> None:
        """Count one example; ``failed`` is the property it broke, ``None`` when it passed."""
        self.cells.setdefault((case.world_size, case.dtype), Tally()).add(failed)
        found = axes(case)
        for axis, values in found.items():
            for value in values:
                self.by_axis.setdefault(axis, {}).setdefault(value, Tally()).add(failed)
        self.pairs.update(interactions({axis: found[axis] for axis in PAIR_AXES if axis in found}))

    @property
    def examples(self) -> int:
        return sum(tally.examples for tally in self.cells.values())

    @property
    def failures(self) -> int:
        """Failing examples (shrinking included: each failing attempt counts)."""
        return sum(tally.failures for tally in self.cells.values())

    def cell(self, world_size: int, dtype: str) -> tuple[int, int]:
        """``(examples, failures)`` of one cell of the W x dtype matrix."""
        tally = self.cells.get((world_size, dtype), Tally())
        return tally.examples, tally.failures

    def axis(self, name: str) -> dict[str, Tally]:
        """The tallies of axis ``name``, every value the space expects included, in display order."""
        seen = self.by_axis.get(name, {})
        values = ordered(name, set(seen) | set(self.expected().get(name, ())))
        return {value: seen.get(value, Tally()) for value in values}

    # -- the space -------------------------------------------------------------------------------

    def in_space(self, world_size: int, dtype: str) -> bool:
        """Whether the run could draw this cell (a merged or hand-fed run may record others)."""
        return self.world_sizes[0] <= world_size <= self.world_sizes[1] and dtype in self.dtypes

    def cells_reached(self) -> tuple[int, int]:
        """``(reached, possible)``: cells of the space's W x dtype matrix with at least one example."""
        lo, hi = self.world_sizes
        return sum(1 for key in self.cells if self.in_space(*key)), (hi - lo + 1) * len(self.dtypes)

    def matrix_rows(self) -> list[tuple[int, int]]:
        """The matrix's rows as W ranges: ``(w, w)`` for each world size of the space (or
        recorded), but a run of two or more never reached shares one row, ``(5, 64)``, so a
        64-rank space with examples at W <= 4 is five rows, not 64."""
        lo, hi = self.world_sizes
        reached = {w for w, _ in self.cells}
        rows: list[tuple[int, int]] = []
        for w in sorted(set(range(lo, hi + 1)) | reached):
            if w not in reached and rows and rows[-1][1] == w - 1 and rows[-1][0] not in reached:
                rows[-1] = (rows[-1][0], w)
            else:
                rows.append((w, w))
        return rows

    def dtype_range(self) -> list[str]:
        """The matrix columns: the space's dtypes and any other one recorded."""
        return ordered("dtype", set(self.dtypes) | {dtype for _, dtype in self.cells})

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

    # -- pairs of the axes that select code paths --------------------------------------------------

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
        """Every pair of :meth:`domain` values some case can hold together (:func:`allowed`), or
        of a merged run's spaces (:attr:`merged_possible`)."""
        return possible_pairs(self.domain()) if self.merged_possible is None else self.merged_possible

    def pairs_missing(self) -> list[str]:
        """The possible pairs no example reached, in axis order."""
        return sorted(self.possible_pairs() - self.pairs, key=_pair_place)

    def pairs_reached(self) -> tuple[int, int]:
        """``(reached, possible)`` pairs of :meth:`domain` values."""
        possible = self.possible_pairs()
        return len(possible & self.pairs), len(possible)

    def never_reached(self) -> list[str]:
        """What the space allows but no example reached: cells (``W=4 bfloat16``), then axis
        values (``dim=-4``), in display order."""
        lo, hi = self.world_sizes
        cells = [f"W={w} {dtype}" for w in range(lo, hi + 1) for dtype in ordered("dtype", self.dtypes)
                 if (w, dtype) not in self.cells]
        seen = self.by_axis
        values = [f"{axis}={value}" for axis, expected in self.expected().items()
                  for value in expected if value not in seen.get(axis, {})]
        return cells + values

    # -- combining and storing -------------------------------------------------------------------

    def merge(self, other: Coverage) -> Coverage:
        """Both runs' counts added up, over the union of their spaces (fuzzing several targets)."""
        merged = Coverage(
            world_sizes=(min(self.world_sizes[0], other.world_sizes[0]), max(self.world_sizes[1], other.world_sizes[1])),
            dtypes=tuple(ordered("dtype", set(self.dtypes) | set(other.dtypes))),
            grad=self.grad or other.grad,
            groups=self.groups or other.groups,
            ragged=self.ragged or other.ragged,
            dims=self.dims if self.dims == other.dims else "any",
            ndims=(min(self.ndims[0], other.ndims[0]), max(self.ndims[1], other.ndims[1])),
            values=tuple(ordered("values", set(self.values) | set(other.values))),
            group_optional=self.group_optional or other.group_optional,
            mesh=self.mesh and other.mesh,
            pairs=self.pairs | other.pairs,
            merged_possible=self.possible_pairs() | other.possible_pairs(),
        )
        for key in self.cells.keys() | other.cells.keys():
            merged.cells[key] = self.cells.get(key, Tally()).plus(other.cells.get(key, Tally()))
        for axis in self.by_axis.keys() | other.by_axis.keys():
            ours, theirs = self.by_axis.get(axis, {}), other.by_axis.get(axis, {})
            merged.by_axis[axis] = {value: ours.get(value, Tally()).plus(theirs.get(value, Tally()))
                                    for value in ours.keys() | theirs.keys()}
        return merged

    def to_json(self) -> dict:
        """A JSON-able document; :meth:`from_json` reads it back equal."""
        return {
            "space": {"world_sizes": list(self.world_sizes), "dtypes": list(self.dtypes), "grad": self.grad,
                      "groups": self.groups, "ragged": self.ragged, "dims": self.dims, "ndims": list(self.ndims),
                      "values": list(self.values), "group_optional": self.group_optional, "mesh": self.mesh},
            "examples": self.examples,
            "failures": self.failures,
            "cells": [{"world_size": w, "dtype": dtype, **self.cells[w, dtype].to_json()}
                      for w, dtype in sorted(self.cells, key=lambda key: (key[0], _place("dtype", key[1])))],
            "axes": {axis: {value: self.by_axis[axis][value].to_json() for value in ordered(axis, self.by_axis[axis])}
                     for axis in AXES if axis in self.by_axis},
            "pairs": {"reached": sorted(self.pairs, key=_pair_place), "possible": self.pairs_reached()[1],
                      "missing": self.pairs_missing(),
                      **({} if self.merged_possible is None else
                         {"merged_possible": sorted(self.merged_possible, key=_pair_place)})},
        }

    @classmethod
    def from_json(cls, data: dict) -> Coverage:
        space = data["space"]
        lo, hi = space["world_sizes"]
        low, high = space["ndims"]
        coverage = cls(world_sizes=(int(lo), int(hi)), dtypes=tuple(space["dtypes"]), grad=bool(space["grad"]),
                       groups=bool(space["groups"]), ragged=bool(space["ragged"]), dims=str(space["dims"]),
                       ndims=(int(low), int(high)), values=tuple(space.get("values", VALUE_RECIPES)),
                       group_optional=bool(space.get("group_optional")), mesh=bool(space.get("mesh")),
                       pairs=set(data.get("pairs", {}).get("reached", ())))
        if "merged_possible" in data.get("pairs", {}):
            coverage.merged_possible = frozenset(data["pairs"]["merged_possible"])
        for cell in data["cells"]:
            coverage.cells[int(cell["world_size"]), str(cell["dtype"])] = Tally.from_json(cell)
        for axis, values in data["axes"].items():
            coverage.by_axis[axis] = {value: Tally.from_json(tally) for value, tally in values.items()}
        return coverage

    # -- the terminal ----------------------------------------------------------------------------

    def summary(self, width: int = 80) -> str:
        """A few lines for the end of a run: totals, the W x dtype matrix, what was never reached.

        A cell shows its examples, ``!`` marks one with failing examples, ``·`` one the space
        allows but no example reached.  The never-reached line is cut to two lines of ``width``.
        """
        reached, possible = self.cells_reached()
        head = f"coverage: {self.examples} case{'' if self.examples == 1 else 's'} run"
        if self.failures:
            head += f", {self.failures} failing (! in the matrix)"
        head += f"; {reached} of {possible} W x dtype cells reached"
        return "\n".join([head, *self._matrix_lines(), *self._never_lines(width), *self._pair_lines(width)])

    def _pair_lines(self, width: int) -> list[str]:
        """``pairs of path axes: 412 of 415 reached; missing (3): W=3 x groups=idle ranks, ...``,
        two lines at most (:meth:`domain` names the axes; the page and the JSON list every pair)."""
        reached, possible = self.pairs_reached()
        missing = self.pairs_missing()
        text = f"pairs of path axes: {reached} of {possible} reached"
        if missing:
            text += f"; missing ({len(missing)}): " + ", ".join(missing)
        return _two_lines(text, width)

    def _matrix_lines(self) -> list[str]:
        dtypes = self.dtype_range()
        rows = [[world_label(lo, hi)] + [self._cell_text(lo, dtype) for dtype in dtypes]
                for lo, hi in self.matrix_rows()]
        header = [""] + [SHORT_DTYPES.get(dtype, dtype) for dtype in dtypes]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        return ["  " + "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
                .rstrip() for row in [header, *rows]]

    def _cell_text(self, world_size: int, dtype: str) -> str:
        examples, failures = self.cell(world_size, dtype)
        if examples:
            return f"{examples}!" if failures else str(examples)
        return "·" if self.in_space(world_size, dtype) else ""

    def _never_lines(self, width: int) -> list[str]:
        """``never reached (2 cells, 1 axis value): W=4 bfloat16, complex128; dim=-4``: cells grouped
        by W (runs of rows never reached as one range), counted apart from axis values (beside
        "N of M cells reached"), two lines at most."""
        missing = self.never_reached()
        if not missing:
            return ["never reached: nothing; every cell and axis value of the space came up"]
        items = [f"{world_label(lo, hi)} {gone}" for lo, hi in self.matrix_rows() if (gone := self._missing_in_row(lo))]
        values = [label for label in missing if not label.startswith("W=")]
        cells = len(missing) - len(values)
        counts = [f"{n} {what}{'' if n == 1 else 's'}" for n, what in ((cells, "cell"), (len(values), "axis value")) if n]
        return _two_lines(f"never reached ({', '.join(counts)}): " + "; ".join(items + values), width)

    def _missing_in_row(self, world_size: int) -> str:
        """The space's dtypes never reached at ``world_size``: ``every dtype``, a list, or ``""``."""
        dtypes = [dtype for dtype in ordered("dtype", self.dtypes)
                  if self.in_space(world_size, dtype) and (world_size, dtype) not in self.cells]
        return "every dtype" if len(dtypes) == len(self.dtypes) else ", ".join(dtypes)


# ---------------------------------------------------------------------------------------------
# which values can go together


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


def _pair_place(label: str) -> tuple:
    parts = [part.split("=", 1) for part in label.split(" x ")]
    return tuple(key for axis, value in parts for key in (PAIR_AXES.index(axis), _place(axis, value)))


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


def _two_lines(text: str, width: int) -> list[str]:
    """``text`` wrapped to ``width``, the rest folded into a second line cut with ``…``: a summary
    line that names what is missing never takes over the terminal."""
    lines = textwrap.wrap(text, width=width, subsequent_indent="  ", break_on_hyphens=False)
    if len(lines) > 2:
        lines[1] = "  " + textwrap.shorten(lines[1] + " " + " ".join(lines[2:]), width=width - 2, placeholder=" …")
    return lines[:2]


def world_label(lo: int, hi: int) -> str:
    """A matrix row's label: ``W=3``, or ``W=5-64`` for a run of world sizes never reached."""
    return f"W={lo}" if lo == hi else f"W={lo}-{hi}"


__all__ = ["AXES", "DIM_KINDS", "GROUP_LAYOUTS", "HIDDEN", "LONG_LENGTH", "MIXED", "PAIR_AXES", "RAGGEDNESS",
           "TRIPLE_AXES", "interactions",
           "Coverage", "Tally", "allowed", "axes", "completable", "events", "ordered", "pair_label", "possible_pairs",
           "world_label"]
