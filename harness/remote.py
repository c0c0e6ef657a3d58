"""Scale-out: ranks that ``torchrun`` starts on many machines serve one driver running Hypothesis.

This module is what torchrun starts on every rank (``-m harness.remote``); it runs
:mod:`harness.ranks.remote_worker`, and the driver is :mod:`harness.pool.remote_driver`.  Every
rank dials the driver twice, authenticated: a *main* connection carrying a pool rank's messages,
and a *side* one a thread serves (the main thread's stack while it is busy; its closing tells
the rank it was abandoned).  After a fault the driver closes the connections, the ranks exit,
and torchrun restarts them while ``--max-restarts`` lasts.  How to run it: docs/scale-out.md.
"""

from __future__ import annotations

import os
import sys

from harness.ranks.remote_worker import worker_main

if __name__ == "__main__":
    status = worker_main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: a broken NCCL group can hang in it
