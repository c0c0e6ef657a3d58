"""What a run tested: examples and failures per world size x dtype, and per value of every other axis.

"No counterexample in 100 examples" says nothing about *which* 100.  :func:`~harness.strategies.space.axes` names,
for one case, the value it takes on every axis the strategies draw; :class:`Coverage` counts
examples and failing examples per W x dtype cell and per axis value, knows which values the
run *could* have reached (its space), and so names the ones it never did.

Everything here is plain data: :meth:`Coverage.to_json` / :meth:`Coverage.from_json`
round-trip, and :meth:`Coverage.merge` adds two runs (fuzzing several targets) up.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from harness.core.case import VALUE_RECIPES, Case
from harness.strategies.space import AXES, PAIR_AXES, Space, axes, interactions, ordered, pair_place, place

#: Short dtype names for the terminal matrix, which must fit 80 columns with 12 dtypes.
SHORT_DTYPES: dict[str, str] = {
    "bool": "bool", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128",
}


# ---------------------------------------------------------------------------------------------
# one case


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
class Coverage(Space):
    """Examples and failures per W x dtype cell and per axis value, within a known :class:`Space`,
    so that :meth:`never_reached` can name what the run's strategies could draw and did not.
    """
    cells: dict[tuple[int, str], Tally] = field(default_factory=dict)
    by_axis: dict[str, dict[str, Tally]] = field(default_factory=dict)
    #: Pairs of :data:`PAIR_AXES` values some example took together, as :func:`~harness.strategies.space.pair_label` names them.
    pairs: set[str] = field(default_factory=set)
    #: A merged run's possible pairs: those of each run merged, not of the union of their spaces
    #: (a gather's bool and a reduction's ``normal`` values never meet); ``None``: the space's own.
    merged_possible: frozenset[str] | None = None

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

    # -- pairs of the axes that select code paths --------------------------------------------------

    def possible_pairs(self) -> frozenset[str]:
        """The space's possible pairs, or those of a merged run's spaces (:attr:`merged_possible`)."""
        return super().possible_pairs() if self.merged_possible is None else self.merged_possible

    def pairs_missing(self) -> list[str]:
        """The possible pairs no example reached, in axis order."""
        return sorted(self.possible_pairs() - self.pairs, key=pair_place)

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
                      for w, dtype in sorted(self.cells, key=lambda key: (key[0], place("dtype", key[1])))],
            "axes": {axis: {value: self.by_axis[axis][value].to_json() for value in ordered(axis, self.by_axis[axis])}
                     for axis in AXES if axis in self.by_axis},
            "pairs": {"reached": sorted(self.pairs, key=pair_place), "possible": self.pairs_reached()[1],
                      "missing": self.pairs_missing(),
                      **({} if self.merged_possible is None else
                         {"merged_possible": sorted(self.merged_possible, key=pair_place)})},
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


__all__ = ["Coverage", "Tally", "world_label"]
