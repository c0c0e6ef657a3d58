"""Hypothesis profiles shared by the project's conftest, the pytest plugin and the CLI.

Our own ``ci`` profile matters: with ``CI=true`` Hypothesis silently loads its built-in one
(derandomized, no database) unless a project registers one.  Every profile has ``deadline=None``:
an example is a multi-process run whose time depends on the machine's load.  The profiles and
how to select one: docs/profiles.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from harness.settings import files
from harness.settings.profile_names import DATABASE_ENV, PROFILE_ENV, WORLD_SIZES, default_name

#: Every phase but ``explain``: after shrinking, it reruns the minimal failure with parts of it
#: varied to say which ones matter -- hundreds of multi-process runs (measured: 30 of a
#: desync finding's 39 s) for a comment the harness's own report never shows.
PHASES = tuple(phase for phase in Phase if phase is not Phase.explain)
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]



class _HiddenDirectoryDatabase(DirectoryBasedExampleDatabase):
    """A directory database that, on its first write, makes the hidden output directory ignore itself."""

    def save(self, key: bytes, value: bytes) -> None:
        files.ensure_dir(self.path)
        super().save(key, value)


def _database() -> DirectoryBasedExampleDatabase:
    """``$GATHER_HARNESS_DATABASE``, else ``examples`` in the hidden output directory."""
    return _HiddenDirectoryDatabase(os.environ.get(DATABASE_ENV) or files.default_path("examples"))


class KeyedDatabase(ExampleDatabase):
    """One target's share of an example database: every key is prefixed with ``prefix``.

    Hypothesis keys saved examples by the test function, the same for every target: without a
    prefix every check would replay every other target's failures.  Public
    :class:`~hypothesis.database.ExampleDatabase` interface only, so any database works.
    """

    def __init__(self, inner: ExampleDatabase, prefix: bytes) -> None:
        super().__init__()
        self.inner = inner
        self.prefix = prefix + b"\0"  # no target's key is a prefix of another's

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self.prefix + src, self.prefix + dest, value)

    def __repr__(self) -> str:
        return f"KeyedDatabase({self.inner!r}, {self.prefix[:-1]!r})"


class ReadOnlyDatabase(ExampleDatabase):
    """A database that replays what ``inner`` holds and changes nothing in it: a search drawn ahead
    of its runs (:meth:`harness.search.session._Session.search`) only collects cases, and
    Hypothesis would delete every saved failure as no longer failing."""

    def __init__(self, inner: ExampleDatabase) -> None:
        super().__init__()
        self.inner = inner

    def save(self, key: bytes, value: bytes) -> None:
        pass

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(key)

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        pass

    def __repr__(self) -> str:
        return f"ReadOnlyDatabase({self.inner!r})"


def read_only(active: settings) -> settings:
    """``active`` with its database (if any) read only (:class:`ReadOnlyDatabase`)."""
    if active.database is None:
        return active
    return settings(active, database=ReadOnlyDatabase(active.database))


def keyed(active: settings, key: bytes) -> settings:
    """``active`` with its database (if any) narrowed to ``key``'s share."""
    if active.database is None:
        return active
    return settings(active, database=KeyedDatabase(active.database, key))


def settings_for(name: str) -> settings:
    """The settings of profile ``name``, built without registering anything globally: checking a
    gather from another project's tests never replaces that project's own profiles."""
    common = settings(deadline=None, suppress_health_check=_SLOW_OK, print_blob=True, phases=PHASES)
    if name == "ci":
        return settings(common, max_examples=100, database=None, derandomize=False)
    examples = {"dev": 100, "nightly": 1000, "fuzz": 10**9}[name]
    return settings(common, max_examples=examples, database=_database())


def for_the_pool(base: settings) -> settings:
    """``base`` (a caller's profile) with what every search on real ranks needs: no deadline, no
    ``explain`` phase (:data:`PHASES`: it made one gradient finding take 24 s instead of 3), and
    no health checks that slow examples trip."""
    phases = tuple(phase for phase in base.phases if phase is not Phase.explain)
    suppressed = list(dict.fromkeys([*base.suppress_health_check, *_SLOW_OK]))
    return settings(base, deadline=None, phases=phases, suppress_health_check=suppressed)


def register() -> None:
    """Register the four profiles with Hypothesis (idempotent); the project's conftest calls it."""
    for name in WORLD_SIZES:
        settings.register_profile(name, settings_for(name))


def load(name: str | None = None) -> str:
    """Register the profiles and make ``name`` (or the default) the active one."""
    register()
    name = name or default_name()
    settings.load_profile(name)
    return name


__all__ = ["DATABASE_ENV", "PHASES", "PROFILE_ENV", "WORLD_SIZES", "KeyedDatabase", "default_name", "for_the_pool",
           "keyed", "load", "register", "settings_for"]
