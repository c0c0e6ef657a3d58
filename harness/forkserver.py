"""The forkserver every local rank is forked from, and starting it early.

Ranks are forked from one ``forkserver`` process that has imported torch (and
``torch._dynamo``, which torch otherwise imports lazily on a rank's first functional-collective
call: seconds that would count against that case's timeout) once, so a rank is ready in tens
of milliseconds.  Those imports take seconds; :func:`start` launches the server without
waiting for them, so the command line can start it first and import its own modules (torch,
Hypothesis) meanwhile, on the other core.  This module imports only the standard library.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
from multiprocessing import forkserver

#: What the forkserver imports before it forks any rank.
PRELOAD: list[str] = ["harness.rank", "torch._dynamo", "harness._fast_exit"]


def context() -> multiprocessing.context.ForkServerContext:
    """The forkserver context ranks are started from, with :data:`PRELOAD` set."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start() -> None:
    """Launch the forkserver now (it does its imports in the background); idempotent."""
    context()
    forkserver.ensure_running()
