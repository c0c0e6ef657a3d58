"""Imported by the rank forkserver only (:data:`harness.pool.forkserver.PRELOAD`): it exits at once.

Finalizing an interpreter that has imported torch takes 1.5-2 s on 2 cores, while the forkserver
still holds the command's stdout and stderr (whatever waits for their end waits too); it has
nothing to flush, so its exit skips that.  Processes forked from it start with Ctrl-C ignored:
Ctrl-C is the driver's to handle, and it stops them.
"""

import atexit
import os
import signal

_SERVER_PID = os.getpid()
signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit_at_once() -> None:
    if os.getpid() == _SERVER_PID:
        os._exit(0)


atexit.register(_exit_at_once)
