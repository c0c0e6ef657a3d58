"""The harness's exception classes, and the exit status each front end gives them.

One home, so that the CLI, ``fuzz`` and ``report`` map an exception to the same status
(:class:`Exit`) and a module raising one needs no other module.  Plain classes, importing
nothing.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """The exit statuses of ``check``, ``fuzz``, ``replay`` and ``report``: a stable interface."""

    #: No counterexample (``replay``: no finding reproduced; ``report``: every row checked).
    PASS = 0
    #: A counterexample: wrong values or gradients, a hang, a crash, a misuse failure.
    COUNTEREXAMPLE = 1
    #: The target could not be loaded, or the arguments are wrong.
    USAGE = 2
    #: The harness itself could not run: no verdict on the target.
    HARNESS = 3
    #: Interrupted (SIGINT, SIGTERM).
    INTERRUPTED = 130


class UsageError(ValueError):
    """A bad argument from a user: the message names the argument, the value and the fix."""


class TargetError(Exception):
    """The target could not be loaded; the message is one line a user can act on."""


class Misfit(TypeError):
    """The target cannot be called, or its result read, by any supported convention."""


#: The attribute of a failed check's ``AssertionError`` holding its summary (:func:`check_failed`).
SUMMARY_ATTRIBUTE = "gather_summary"


def check_failed(text: str, summary: list[str]) -> AssertionError:
    """The error a failed check raises: the whole failure as an ``AssertionError`` (pytest shows it
    as one, in few columns: a class of ours would read ``harness.core.errors...`` before the verdict),
    carrying the lines a test report tells of it (:func:`summary_of`): the verdict, then the detail."""
    error = AssertionError(text)
    setattr(error, SUMMARY_ATTRIBUTE, summary)
    return error


def summary_of(error: BaseException) -> list[str] | None:
    """The summary lines of an error :func:`check_failed` made; ``None`` for any other error."""
    return getattr(error, SUMMARY_ATTRIBUTE, None)


class PoolError(RuntimeError):
    """The harness could not start ranks or run its own helpers on them: never a fault of the
    code under test.  The message says what failed and what to try; the CLI exits 3 with it."""


class RankCallFailed(PoolError):
    """A rank did not return from a helper call (it died, or was still running at the timeout);
    ``ranks`` says how each such rank ended, the message also which call it was."""

    def __init__(self, call: str, ranks: str, *, died: bool) -> None:
        super().__init__(f"{call}: {ranks}")
        self.ranks = ranks
        #: Every rank that did not return had died (none was still running at the timeout).
        self.died = died


class PoolGone(BaseException):
    """The ranks are gone for good (a remote job that did not come back, local sets that would not
    start again).  A ``BaseException``, so Hypothesis stops at once instead of shrinking it."""


class CompileTimeout(BaseException):
    """A case ran out of time while the target was still compiling: no verdict, only a timeout
    too short for the compiler.  A ``BaseException``, as :class:`PoolGone`."""


def exit_status(exc: BaseException) -> Exit | None:
    """The status an exception ends a command with: :attr:`Exit.USAGE` for a target or arguments
    that cannot be used, :attr:`Exit.HARNESS` when the harness could not run; ``None`` for any
    other (a bug of the harness's own, which the CLI reports apart)."""
    if isinstance(exc, (UsageError, TargetError, Misfit, CompileTimeout)):
        return Exit.USAGE
    if isinstance(exc, (PoolError, PoolGone)):
        return Exit.HARNESS
    return None
