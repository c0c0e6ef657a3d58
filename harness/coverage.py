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
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.case import COTANGENT_LAYOUTS, COTANGENT_RECIPES, LAYOUTS, VALUE_RECIPES, Case
from harness.contract import ALL_DTYPES, DIFFERENTIABLE_DTYPES, OUTPUTS, Contract

#: A rank at least this long along the gather dim counts as long (lengths past a byte).
LONG_LENGTH = 256
RAGGEDNESS: tuple[str, ...] = ("equal", "ragged", "zero-length rank", "all empty")
GROUP_LAYOUTS: tuple[str, ...] = ("world", "one group", "several groups", "idle ranks")
#: The dims the strategies draw (``strategies._internal._NDIM``); ``stack`` results add 0-d inputs.
NDIMS: tuple[int, int] = (1, 4)

#: Every axis, in display order, with the rule that counts it (one line, shown on the page).
AXES: dict[str, str] = {
    "W": "world size",
    "dtype": "input dtype",
    "ndim": "dims of each input",
    "dim": "gather dim as passed; negative dims kept apart",
    "raggedness": "lengths along dim; the first that holds of: all empty, zero-length rank, ragged, equal",
    "long rank": f"some rank is >= {LONG_LENGTH} long along dim",
    "layout": "input layout; per rank: a case counts under each layout its ranks hold",
    "values": "value class; per rank: a case counts under each class its ranks hold",
    "groups": "world: no group passed; idle ranks: some rank in no group (also counted as one/several)",
    "output": "how the result reads",
    "cotangent": "cotangent recipe; cases with gradients only; per rank",
    "cotangent layout": "cotangent layout; cases with gradients only; per rank",
}
#: The order values of an axis are shown in; axes not named here hold integers, shown in order.
_ORDER: dict[str, tuple[str, ...]] = {
    "dtype": ALL_DTYPES,
    "raggedness": RAGGEDNESS,
    "long rank": ("no", "yes"),
    "layout": LAYOUTS,
    "values": VALUE_RECIPES,
    "groups": GROUP_LAYOUTS,
    "output": tuple(OUTPUTS),
    "cotangent": COTANGENT_RECIPES,
    "cotangent layout": COTANGENT_LAYOUTS,
}
#: Short dtype names for the terminal matrix, which must fit 80 columns with 12 dtypes.
SHORT_DTYPES: dict[str, str] = {
    "bool": "bool", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128",
}


# ---------------------------------------------------------------------------------------------
# one case


def axes(case: Case) -> dict[str, tuple[str, ...]]:
    """The value(s) ``case`` takes on every axis, in :data:`AXES` order (see the module docstring).

    E.g. ``{"W": ("2",), "dtype": ("float16",), ..., "layout": ("contiguous", "offset"), ...}``;
    the cotangent axes are absent for a case without gradients.
    """
    active = [r for r in range(case.world_size) if not case.idle(r)]
    specs = [case.ranks[r] for r in active]
    found = {
        "W": (str(case.world_size),),
        "dtype": (case.dtype,),
        "ndim": (str(case.ndim),),
        "dim": (str(case.dim),),
        "raggedness": (_raggedness(case, active),),
        "long rank": ("yes" if any(case.lengths[r] >= LONG_LENGTH for r in active) else "no",),
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
    if not any(math.prod(case.ranks[r].shape) for r in active):
        return "all empty"
    if any(case.lengths[r] == 0 for r in active):
        return "zero-length rank"
    return "ragged" if case.is_ragged else "equal"


def _group_layout(case: Case) -> tuple[str, ...]:
    if not case.groups:
        return ("world",)
    layout = ("one group",) if len(case.groups) == 1 else ("several groups",)
    return layout + (("idle ranks",) if any(case.idle(r) for r in range(case.world_size)) else ())


def _held(axis: str, values: Iterable[str]) -> tuple[str, ...]:
    """The distinct values the ranks hold on a per-rank axis, in display order."""
    return tuple(ordered(axis, set(values)))


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
    - ``ragged`` (default True), ``dims`` (``"any"`` default, or ``"0"``), ``ndims`` (default
      ``(1, 4)``): the shapes drawn; an equal-only or dim-0 run is not blamed for missing
      ragged cases or dim -1.

    :meth:`for_contract` derives all of it from the contract the cases are drawn for.
    """

    world_sizes: tuple[int, int] = (1, 4)
    dtypes: tuple[str, ...] = ALL_DTYPES
    grad: bool = False
    groups: bool = False
    ragged: bool = True
    dims: str = "any"
    ndims: tuple[int, int] = NDIMS
    cells: dict[tuple[int, str], Tally] = field(default_factory=dict)
    by_axis: dict[str, dict[str, Tally]] = field(default_factory=dict)

    @classmethod
    def for_contract(cls, contract: Contract, dtypes: tuple[str, ...] | None = None) -> Coverage:
        """The space of ``strategies.cases(contract=contract, dtypes=dtypes)``: a ``stack``
        convention draws equal shapes only, 0-d ones included."""
        stack = contract.read_as.stacked  # the one convention that reads 0-d inputs
        return cls(world_sizes=contract.world_sizes, dtypes=dtypes or contract.dtypes, grad=contract.grad != "none",
                   groups=bool(contract.groups), ragged=contract.ragged_cases,
                   dims=contract.dims, ndims=(0 if stack else NDIMS[0], NDIMS[1]))

    def record(self, case: Case, failed: str | None = None) -> None:
        """Count one example; ``failed`` is the property it broke, ``None`` when it passed."""
        self.cells.setdefault((case.world_size, case.dtype), Tally()).add(failed)
        for axis, values in axes(case).items():
            for value in values:
                self.by_axis.setdefault(axis, {}).setdefault(value, Tally()).add(failed)

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
            "dim": ("0",) if self.dims == "0" else tuple(str(d) for d in range(-high, high)),
            "raggedness": tuple(v for v in RAGGEDNESS if self.ragged and several or v in ("equal", "all empty")),
            "long rank": ("no", "yes"),
            "layout": LAYOUTS,
            "values": VALUE_RECIPES,
            "groups": tuple(v for v in GROUP_LAYOUTS[1:] if several or v == "one group") if self.groups else ("world",),
        }
        if self.grad and any(dtype in DIFFERENTIABLE_DTYPES for dtype in self.dtypes):
            found["cotangent"] = COTANGENT_RECIPES
            found["cotangent layout"] = COTANGENT_LAYOUTS
        return found

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
            dims="any" if "any" in (self.dims, other.dims) else "0",
            ndims=(min(self.ndims[0], other.ndims[0]), max(self.ndims[1], other.ndims[1])),
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
                      "groups": self.groups, "ragged": self.ragged, "dims": self.dims, "ndims": list(self.ndims)},
            "examples": self.examples,
            "failures": self.failures,
            "cells": [{"world_size": w, "dtype": dtype, **self.cells[w, dtype].to_json()}
                      for w, dtype in sorted(self.cells, key=lambda key: (key[0], _place("dtype", key[1])))],
            "axes": {axis: {value: self.by_axis[axis][value].to_json() for value in ordered(axis, self.by_axis[axis])}
                     for axis in AXES if axis in self.by_axis},
        }

    @classmethod
    def from_json(cls, data: dict) -> Coverage:
        space = data["space"]
        lo, hi = space["world_sizes"]
        low, high = space["ndims"]
        coverage = cls(world_sizes=(int(lo), int(hi)), dtypes=tuple(space["dtypes"]), grad=bool(space["grad"]),
                       groups=bool(space["groups"]), ragged=bool(space["ragged"]), dims=str(space["dims"]),
                       ndims=(int(low), int(high)))
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
        return "\n".join([head, *self._matrix_lines(), *self._never_lines(width)])

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
        """``never reached (3): W=4 bfloat16, complex128; dim=-4``: cells grouped by W (runs of
        rows never reached as one range), two lines at most."""
        missing = self.never_reached()
        if not missing:
            return ["never reached: nothing; every cell and axis value of the space came up"]
        items = [f"{world_label(lo, hi)} {gone}" for lo, hi in self.matrix_rows() if (gone := self._missing_in_row(lo))]
        items += [label for label in missing if not label.startswith("W=")]
        lines = textwrap.wrap(f"never reached ({len(missing)}): " + "; ".join(items), width=width,
                              subsequent_indent="  ", break_on_hyphens=False)
        if len(lines) > 2:
            lines[1] = "  " + textwrap.shorten(lines[1] + " " + lines[2], width=width - 2, placeholder=" …")
        return lines[:2]

    def _missing_in_row(self, world_size: int) -> str:
        """The space's dtypes never reached at ``world_size``: ``every dtype``, a list, or ``""``."""
        dtypes = [dtype for dtype in ordered("dtype", self.dtypes)
                  if self.in_space(world_size, dtype) and (world_size, dtype) not in self.cells]
        return "every dtype" if len(dtypes) == len(self.dtypes) else ", ".join(dtypes)


def world_label(lo: int, hi: int) -> str:
    """A matrix row's label: ``W=3``, or ``W=5-64`` for a run of world sizes never reached."""
    return f"W={lo}" if lo == hi else f"W={lo}-{hi}"


__all__ = ["AXES", "GROUP_LAYOUTS", "LONG_LENGTH", "RAGGEDNESS", "Coverage", "Tally", "axes", "events", "ordered",
           "world_label"]
