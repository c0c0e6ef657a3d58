"""``python -m harness`` and the ``gather-harness`` script (pyproject's ``harness.__main__:main``).

The commands live in :mod:`harness.cli`; ``main(argv=None) -> int`` returns the exit status.
Commands that run ranks start the rank forkserver first (:func:`harness.forkserver.start`), so
that its imports overlap the command line's own instead of following them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness import forkserver

#: The commands that start rank processes.
RANK_COMMANDS = frozenset({"check", "fuzz", "report", "replay"})


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in RANK_COMMANDS and not {"-h", "--help", "--listen"} & set(args):
        forkserver.start()
    from harness.cli import main as run_command

    return run_command(args)


__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
