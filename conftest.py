"""Project-wide pytest set-up: our Hypothesis profiles and the shared rank pool.

Importing this registers ``dev``/``ci``/``nightly``/``fuzz`` (see ``harness.settings.profiles``) and
loads the default one *before* Hypothesis' pytest plugin reads ``--hypothesis-profile``,
so ``CI=true`` selects our ``ci`` profile, never Hypothesis' built-in one.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings

from harness.pool.pool import LocalPool, shared_pool
from harness.settings import profiles

ACTIVE_PROFILE = profiles.load()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"gather-harness: hypothesis profile {settings._current_profile}, torch {torch.__version__}, backend gloo/cpu"]


@pytest.fixture(scope="session")
def pool() -> LocalPool:
    """The warm rank pool shared by every test in this pytest process (one per xdist worker)."""
    shared = shared_pool()
    yield shared
    shared.close()
