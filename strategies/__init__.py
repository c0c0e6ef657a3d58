"""Hypothesis strategies for gather cases.

``cases(contract=...)`` draws in-contract examples, ``misuse_cases(...)`` misuse
cases (out-of-contract input); the smaller strategies (``world_sizes``, ``lengths``, ``ragged_shapes``, ``dtypes``,
``rank_specs``) are public for tests and other projects.  Every function validates its
arguments when called and raises ``harness.core.contract.UsageError`` naming the argument.
"""

from harness.strategies import _internal, _misuse, _shapes
from harness.strategies._internal import SIMPLEST_DTYPES, cases, dtypes, rank_specs, simplest_first
from harness.strategies._misuse import contract_violations, has_misuse, misuse_cases
from harness.strategies._shapes import (
    MAX_WORLD_SIZE,
    Like,
    RaggedShapes,
    group_layout,
    lengths,
    ragged_shapes,
    world_sizes,
)
from harness.strategies._strata import Stratum, covering_rows, random_strata, strata

__all__ = [
    "MAX_WORLD_SIZE",
    "SIMPLEST_DTYPES",
    "Like",
    "Stratum",
    "RaggedShapes",
    "cases",
    "contract_violations",
    "covering_rows",
    "dtypes",
    "group_layout",
    "has_misuse",
    "lengths",
    "misuse_cases",
    "ragged_shapes",
    "random_strata",
    "rank_specs",
    "simplest_first",
    "strata",
    "world_sizes",
]

assert set(_internal.__all__) | set(_shapes.__all__) | set(_misuse.__all__) <= set(__all__), "re-export every public name of the modules"
