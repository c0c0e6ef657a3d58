"""Imported by the rank forkserver only (:data:`harness.forkserver.PRELOAD`): it exits at once.

When the driver ends, the forkserver sees its pipe close and exits like any Python process:
finalizing an interpreter that has imported torch and ``torch._dynamo`` takes 1.5-2 s on a
2-core machine, during which it still held the command's stdout and stderr, so whatever waited
for their end (a shell pipeline, ``subprocess.run(capture_output=True)``, CI) waited too.
It has nothing to flush or save, so its exit skips that finalization.  Ranks forked from it
inherit the registration but never run it: they leave through ``os._exit`` themselves, and
the check of the process id would skip it anyway.
"""

import atexit
import os

_SERVER_PID = os.getpid()


def _exit_at_once() -> None:
    if os.getpid() == _SERVER_PID:
        os._exit(0)


atexit.register(_exit_at_once)
