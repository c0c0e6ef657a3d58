"""``python -m harness`` and the ``gather-harness`` script (pyproject's ``harness.__main__:entry``).

The commands live in :mod:`harness.frontends.commands`; ``main(argv=None) -> int`` returns the exit status
(tests call it in-process).  Commands that run ranks start the rank forkserver as soon as
their arguments are checked (:func:`harness.pool.forkserver.start`), so that its imports overlap
the command line's own instead of following them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from harness.frontends.commands import main as run_command
from harness.pool import forkserver


def main(argv: Sequence[str] | None = None) -> int:
    return run_command(list(sys.argv[1:] if argv is None else argv))


def entry() -> NoReturn:
    """Run the command line and exit with its status, skipping the interpreter's finalization.

    Tearing down an interpreter that has imported torch and Hypothesis takes 0.7 s on a
    2-core machine, after everything was written: a tenth of a whole ``check`` that finds a bug.
    The exit-time work of the command (its pool's ranks stopped, files closed) is done by
    the atexit handlers registered while it ran, which run before :func:`_exit_now`, the
    first registered and so the last to run.  An uncaught exception exits the usual way.
    """
    status: list[int] = []
    forkserver.share_imports()
    atexit.register(_exit_now, status)
    sys.stdout, sys.stderr = _QuietWhenClosed(sys.stdout), _QuietWhenClosed(sys.stderr)
    status.append(main())
    sys.exit(status[0])


class _QuietWhenClosed:
    """A standard stream that goes quiet when its reader leaves (``check ... | head -1``): the
    command goes on to its verdict and exits with its status, where a ``BrokenPipeError`` from
    a ``print`` made it an internal error (exit 3, an internal-error file) and lost the verdict."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        """Point the descriptor at /dev/null: what is still buffered, and the exit-time flush, go there."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _exit_now(status: list[int]) -> None:
    if status:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
                stream.flush()
        os._exit(status[0])


__all__ = ["entry", "main"]

if __name__ == "__main__":
    entry()
