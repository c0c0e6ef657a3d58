"""Hypothesis profiles shared by the project's conftest, the pytest plugin and the CLI.

Registering our own ``ci`` profile matters: with ``CI=true`` Hypothesis silently loads its
built-in ``ci`` profile (derandomized, no database) unless a project registers one.  Every
profile has ``deadline=None`` because an example is a real multi-process run whose time
depends on the machine's load, not on the code under test.

- ``dev`` (default on a workstation): 100 examples, example database in ``.hypothesis/``.
- ``ci`` (default when ``CI`` is set): 100 examples, randomized, no database, world sizes 1..4.
- ``nightly``: 1000 examples, database, world sizes 1..8.
- ``fuzz``: effectively unbounded examples (use a time budget), database, world sizes 1..8.

Select with ``GATHER_HARNESS_PROFILE=<name>`` or pytest's ``--hypothesis-profile``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

PROFILE_ENV = "GATHER_HARNESS_PROFILE"
DATABASE_ENV = "GATHER_HARNESS_DATABASE"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

#: The world-size range each profile draws by default (the CLI's --world-sizes overrides it).
WORLD_SIZES: dict[str, tuple[int, int]] = {"dev": (1, 4), "ci": (1, 4), "nightly": (1, 8), "fuzz": (1, 8)}


def _database() -> DirectoryBasedExampleDatabase:
    return DirectoryBasedExampleDatabase(os.environ.get(DATABASE_ENV, os.path.join(".hypothesis", "examples")))


def settings_for(name: str) -> settings:
    """The settings of profile ``name``, built without registering anything globally.

    The Python API and the CLI use this, so checking a gather from another project's test
    suite never replaces that project's own ``dev``/``ci`` profiles.
    """
    common = dict(deadline=None, suppress_health_check=_SLOW_OK, print_blob=True)
    if name == "ci":
        return settings(max_examples=100, database=None, derandomize=False, **common)
    examples = {"dev": 100, "nightly": 1000, "fuzz": 10**9}[name]
    return settings(max_examples=examples, database=_database(), **common)


def register() -> None:
    """Register the four profiles with Hypothesis (idempotent); the project's conftest calls it."""
    for name in WORLD_SIZES:
        settings.register_profile(name, settings_for(name))


def default_name() -> str:
    """The profile to use when nobody asked: the env var, else ``ci`` under CI, else ``dev``."""
    chosen = os.environ.get(PROFILE_ENV)
    if chosen:
        if chosen not in WORLD_SIZES:
            from harness.contract import UsageError

            raise UsageError(f"{PROFILE_ENV}={chosen!r}: expected one of {', '.join(WORLD_SIZES)}")
        return chosen
    return "ci" if os.environ.get("CI", "").lower() not in ("", "0", "false") else "dev"


def load(name: str | None = None) -> str:
    """Register the profiles and make ``name`` (or the default) the active one."""
    register()
    name = name or default_name()
    settings.load_profile(name)
    return name
