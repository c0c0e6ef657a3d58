"""The Hypothesis profiles by name: which exist, their world sizes, and which one applies.

Plain data, apart from :mod:`harness.settings.profiles`, so the command line checks ``--profile``
without importing Hypothesis.
"""

from __future__ import annotations

import os

PROFILE_ENV = "GATHER_HARNESS_PROFILE"
DATABASE_ENV = "GATHER_HARNESS_DATABASE"

#: The world-size range each profile draws by default (the CLI's --world-sizes overrides it).
WORLD_SIZES: dict[str, tuple[int, int]] = {"dev": (1, 4), "ci": (1, 4), "nightly": (1, 8), "fuzz": (1, 8)}


def default_name() -> str:
    """The profile to use when nobody asked: the env var, else ``ci`` under CI, else ``dev``."""
    chosen = os.environ.get(PROFILE_ENV)
    if chosen:
        if chosen not in WORLD_SIZES:
            from harness.core.errors import UsageError

            raise UsageError(f"{PROFILE_ENV}={chosen!r}: expected one of {', '.join(WORLD_SIZES)}")
        return chosen
    return "ci" if os.environ.get("CI", "").lower() not in ("", "0", "false") else "dev"
