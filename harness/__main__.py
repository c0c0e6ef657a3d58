"""``python -m harness`` and the ``gather-harness`` script (pyproject's ``harness.__main__:entry``).

The commands live in :mod:`harness.cli`; ``main(argv=None) -> int`` returns the exit status
(tests call it in-process).  Commands that run ranks start the rank forkserver as soon as
their arguments are checked (:func:`harness.forkserver.start`), so that its imports overlap
the command line's own instead of following them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from harness.cli import main as run_command


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(list(sys.argv[1:] if argv is None else argv))


def entry() -> NoReturn:
    """Run the command line and exit with its status, skipping the interpreter's finalization.

    Tearing down an interpreter that has imported torch and Hypothesis took 0.7 s on the
    2-core box, after everything was written: a tenth of a whole ``check`` that finds a bug.
    The exit-time work of the command (its pool's ranks stopped, files closed) is done by
    the atexit handlers registered while it ran, which run before :func:`_exit_now`, the
    first registered and so the last to run.  An uncaught exception exits the usual way.
    """
    status: list[int] = []
    atexit.register(_exit_now, status)
    status.append(main())
    sys.exit(status[0])


def _exit_now(status: list[int]) -> None:
    if status:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
                stream.flush()
        os._exit(status[0])


__all__ = ["entry", "main"]

if __name__ == "__main__":
    entry()
