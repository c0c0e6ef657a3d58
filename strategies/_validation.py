"""Argument checks for the public strategies: validate before drawing, name the argument.

Each check raises :class:`harness.core.errors.UsageError` with ``<argument>=<value>`` in the
message and the fix, so that a bad option fails when the strategy is built (in the CLI or at
test collection), not on the first draw deep inside a run.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.errors import UsageError


def check_int(name: str, value: object, *, at_least: int, at_most: int | None = None, example: int = 1) -> int:
    """``value`` as an int in ``[at_least, at_most]``; bools are rejected (``True`` is not a size)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{name}={value!r} should be an int, e.g. {name}={example}")
    if value < at_least or (at_most is not None and value > at_most):
        upper = "" if at_most is None else f" and <= {at_most}"
        raise UsageError(f"{name}={value!r} is out of range: it should be >= {at_least}{upper}")
    return value


def check_min_max(min_name: str, low: int, max_name: str, high: int) -> None:
    """Hypothesis' wording for an empty interval, e.g. ``Cannot have max_value=2 < min_value=3``."""
    if high < low:
        raise UsageError(f"Cannot have {max_name}={high!r} < {min_name}={low!r}; pass {min_name} <= {max_name}")


def check_interval(name: str, value: object, *, at_least: int, at_most: int | None = None) -> tuple[int, int]:
    """A ``(low, high)`` pair of ints with ``at_least <= low <= high <= at_most``."""
    example = (at_least, at_least if at_most is None else at_most)
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise UsageError(f"{name}={value!r} should be a (low, high) pair of ints, e.g. {name}={example}")
    low, high = value
    if high < low:
        raise UsageError(f"{name}={tuple(value)!r}: Cannot have high={high} < low={low}; pass {name}={(high, low)}")
    if low < at_least or (at_most is not None and high > at_most):
        upper = "" if at_most is None else f" and high <= {at_most}"
        raise UsageError(f"{name}={tuple(value)!r} is out of range: it should have low >= {at_least}{upper}")
    return low, high


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{name}={value!r} should be True or False")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise UsageError(f"{name}={value!r} should be one of {', '.join(map(repr, choices))}")
    return value  # type: ignore[return-value]


def check_names(name: str, value: object, known: Sequence[str]) -> tuple[str, ...]:
    """A non-empty tuple of names from ``known`` (a bare string is a common slip: say so)."""
    if isinstance(value, str) or not isinstance(value, (tuple, list, frozenset, set)):
        raise UsageError(f"{name}={value!r} should be a tuple of names, e.g. {name}=({known[0]!r},)")
    if not value:
        raise UsageError(f"{name}={value!r} is empty; pass at least one of {', '.join(known)}")
    unknown = [item for item in value if item not in known]
    if unknown:
        raise UsageError(f"{name}={value!r} has unknown names {unknown}; known: {', '.join(known)}")
    return tuple(value)
