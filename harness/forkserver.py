"""The forkserver every local rank is forked from, and starting it early.

Ranks are forked from one ``forkserver`` process that has imported torch (and
``torch._dynamo``, which torch otherwise imports lazily on a rank's first functional-collective
call: seconds that would count against that case's timeout) once, so a rank is ready in tens
of milliseconds.  Those imports take seconds; :func:`start` launches the server without
waiting for them, so the command line can start it first and import its own modules (torch,
Hypothesis) meanwhile, on the other core.  This module imports only the standard library.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.context
from multiprocessing import forkserver, resource_tracker

#: What the forkserver imports before it forks any rank.
PRELOAD: list[str] = ["harness.rank", "torch._dynamo", "harness._fast_exit"]


def context() -> multiprocessing.context.ForkServerContext:
    """The forkserver context ranks are started from, with :data:`PRELOAD` set."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    if not _STOP_REGISTERED:
        _STOP_REGISTERED.append(True)
        atexit.register(stop)  # before any pool registers its close: so it runs after them
    return ctx


_STOP_REGISTERED: list[bool] = []


def stop() -> None:
    """Stop the forkserver and the resource tracker multiprocessing started, and wait for both.

    Left alone they notice the end of the process that started them a moment after it, so
    a command (or a pytest session) would return while they still ran.  Called at exit,
    after the pools have stopped their ranks.  ``_stop`` is multiprocessing's own way to do
    this (its test suite's); without it (another Python) they end on their own, as before.
    """
    for server in (getattr(forkserver, "_forkserver", None), getattr(resource_tracker, "_resource_tracker", None)):
        with contextlib.suppress(AttributeError, OSError, ChildProcessError, TypeError):  # TypeError: never started
            server._stop()  # type: ignore[union-attr]


def start() -> None:
    """Launch the forkserver now (it does its imports in the background); idempotent."""
    context()
    forkserver.ensure_running()
