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


@pytest.fixture(autouse=True)
def _the_fast_loop_never_shrinks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test outside ``slow`` whose search meets a failure (and so shrinks it) fails: the fast loop
    (``-m "not slow"``) stays free of shrinking searches.  Searches in this process only; a
    command run in a subprocess is ``slow`` by its module's mark."""
    if request.node.get_closest_marker("slow") is not None:
        return
    from harness.search import session

    class NoShrinking(session.ShrinkClock):
        def failed(self, elapsed_s: float, kind: str) -> None:
            pytest.fail(f"{request.node.nodeid} shrinks a failure ({kind}): mark it slow, or it is not the fast loop's")

    monkeypatch.setattr(session, "ShrinkClock", NoShrinking)
