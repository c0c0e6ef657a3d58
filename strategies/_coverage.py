"""Labels for ``hypothesis.event()``: which corners of the case space a run has reached.

``pytest --hypothesis-show-statistics`` then shows, per property, how often each corner came
up, so a strategy that stops reaching one (after an edit, or under a narrow contract) shows.
"""

from __future__ import annotations

import math

from harness.case import Case

#: A rank at least this long along the gather dim counts as long (lengths past a byte).
LONG_LENGTH = 256


def coverage_events(case: Case) -> list[str]:
    """The corners ``case`` touches, e.g. ``["W=3", "dtype=float16", "dim<0", "empty rank", ...]``."""
    events = [f"W={case.world_size}", f"ndim={case.ndim}", f"dtype={case.dtype}", _dim_sign(case.dim)]
    sizes = [math.prod(spec.shape) for spec in case.ranks]
    if 0 in case.lengths:
        events.append("empty rank")
    if not any(sizes):
        events.append("all empty")
    if case.is_ragged:
        events.append("ragged")
    if max(case.lengths) >= LONG_LENGTH:
        events.append(f"long rank (>= {LONG_LENGTH})")
    if any(spec.layout != "contiguous" for spec in case.ranks):
        events.append("non-contiguous input")
    events += sorted({f"values={spec.values}" for spec in case.ranks if spec.values != "iota"})
    if case.grad != "none":
        events += _cotangent_events(case)
    return events


def _dim_sign(dim: int) -> str:
    return "dim<0" if dim < 0 else "dim=0" if dim == 0 else "dim>0"


def _cotangent_events(case: Case) -> list[str]:
    recipes = sorted({spec.cotangent for spec in case.ranks})
    events = [f"cotangent={recipe}" for recipe in recipes]
    if len(recipes) > 1:
        events.append("mixed cotangents")
    if any(spec.cotangent_layout != "contiguous" for spec in case.ranks):
        events.append("non-contiguous cotangent")
    return events
