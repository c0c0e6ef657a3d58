"""Project-wide pytest set-up: our Hypothesis profiles and the shared rank pool.

Importing this registers ``dev``/``ci``/``nightly``/``fuzz`` (see ``harness.settings.profiles``) and
loads the default one *before* Hypothesis' pytest plugin reads ``--hypothesis-profile``,
so ``CI=true`` selects our ``ci`` profile, never Hypothesis' built-in one.
"""

from __future__ import annotations

import getpass
import os
import shutil
import tempfile
from collections.abc import Iterator

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


@pytest.fixture
def subprocess_env() -> Iterator[dict[str, str]]:
    """The environment for a test's subprocesses, with a temporary directory of the test's own that
    goes with the test: torchrun leaves a ``torchelastic_*`` log directory in the temporary directory
    of every job it runs, which the suite must not leave in the system's.  Short (``mkdtemp`` under the
    system's, not ``tmp_path``): a rank's socket path in it must fit in 108 bytes.  Compiles keep
    torch's usual cache (under the system's temporary directory), warm across tests as in-process."""
    inductor_cache = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    own = tempfile.mkdtemp(prefix="gather-test-tmp-")
    yield {"TORCHINDUCTOR_CACHE_DIR": inductor_cache, **os.environ, "TMPDIR": own}
    shutil.rmtree(own, ignore_errors=True)


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
