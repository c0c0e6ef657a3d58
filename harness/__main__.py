"""``python -m harness`` and the ``gather-harness`` script (pyproject's ``harness.__main__:main``).

The commands live in :mod:`harness.cli`; ``main(argv=None) -> int`` returns the exit status.
"""

from __future__ import annotations

import sys

from harness.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
