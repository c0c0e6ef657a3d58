"""Imported by the rank forkserver only (:data:`harness.pool.forkserver.PRELOAD`): it exits at once.

When the driver ends, the forkserver sees its pipe close and exits like any Python process:
finalizing an interpreter that has imported torch and ``torch._dynamo`` takes 1.5-2 s on a
2-core machine, during which it still held the command's stdout and stderr, so whatever waited
for their end (a shell pipeline, ``subprocess.run(capture_output=True)``, CI) waited too.
It has nothing to flush or save, so its exit skips that finalization.  Ranks forked from it
inherit the registration but never run it: they leave through ``os._exit`` themselves, and
the check of the process id would skip it anyway.

Every process forked from it starts with Ctrl-C ignored (multiprocessing's forkserver hands its
children the SIGINT disposition it found after its imports): Ctrl-C is the driver's to handle, and
it stops them; a rank still starting when it came printed a ``KeyboardInterrupt`` traceback from
multiprocessing's bootstrap, before its own code could ignore it.
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
