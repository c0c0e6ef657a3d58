"""The forkserver every local rank is forked from, and starting it early.

Ranks are forked from one process that has imported torch and ``torch._dynamo`` (else imported on
a rank's first functional collective, against its case's timeout) once, so a rank is ready in
milliseconds; :func:`start` launches it without waiting for those seconds of imports.  A command
line's own process (:func:`share_imports`) forks that process from itself, right after importing
torch, instead of starting a new interpreter that imports torch again: the same server, about a
CPU second less per command (a check of ``examples/buggy.py``: 3.4-3.9 CPU-s against 4.4-4.8).
This module imports only the standard library and :mod:`harness.layers` (torch where a command
line shares its imports).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import multiprocessing.context
import os
import shutil
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from multiprocessing import forkserver, process, resource_tracker, util
from typing import Any

from harness import layers

_RANKS = layers.package("ranks")
#: What the forkserver imports before it forks any rank: the rank loop (and with it the rank side);
#: the fast exit last, so that its exit handler runs before any the others registered.
PRELOAD: list[str] = [f"{_RANKS}.rank", "torch._dynamo", f"{_RANKS}._fast_exit"]
#: ... and, for a command that compiles the target itself (``--compile``), the compiler, with its
#: question of which vector instructions the CPU kernels may use answered (``harness.ranks._compiler``
#: does both on import; named literally here, so that no docstring check imports it): a fresh rank
#: set (each failing shrink step with compiled collectives, each confirmation replay) would import it
#: and ask again on every rank before its first compile (2.5 s a rank on 2 cores).  Not for every
#: command: a forkserver that does this takes about 2 s more to start.
COMPILER_PRELOAD: list[str] = [f"{_RANKS}._compiler"]


#: The longest path of an AF_UNIX socket (``sun_path`` less its terminator): Linux's, and the BSDs'.
SUN_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
#: The forkserver socket's directory is ``<tmp>/pymp-gather-harness-<driver pid>-*``: a driver killed
#: before its exit handlers ran (SIGKILL, or SIGTERM where nothing handles it) leaves it behind, and
#: the next pool removes it (:class:`harness.pool.pool.LocalPool`), as it does the driver's rank directory.
SOCKET_PREFIX = "pymp-gather-harness-"
#: What goes after the temporary directory in the socket's path: the directory (pid at most 7
#: digits) and multiprocessing's ``/listener-XXXXXXXX``.
_SOCKET_NAME_LENGTH = len(f"/{SOCKET_PREFIX}4194304-XXXXXXXX/listener-XXXXXXXX")


#: Set by :func:`start` for a command that compiles its target.
_COMPILING: list[bool] = []


def preload(*, compiling: bool) -> list[str]:
    """:data:`PRELOAD`, with :data:`COMPILER_PRELOAD` before its last module when ``compiling``."""
    return [*PRELOAD[:-1], *(COMPILER_PRELOAD if compiling else []), PRELOAD[-1]]


def context() -> multiprocessing.context.ForkServerContext:
    """The forkserver context ranks are started from, with :func:`preload`'s modules set."""
    _socket_dir()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload(compiling=bool(_COMPILING)))
    if not _STOP_REGISTERED:
        _STOP_REGISTERED.append(True)
        atexit.register(stop)  # before any pool registers its close: so it runs after them
    return ctx


_STOP_REGISTERED: list[bool] = []


def _socket_dir() -> None:
    """Give multiprocessing a directory of ours for the forkserver's socket, removed by :func:`stop`
    (the command line's fast exit skips multiprocessing's own cleanup), named after this process
    (:data:`SOCKET_PREFIX`) so that one a killed driver left is told from a running driver's."""
    config = process.current_process()._config  # type: ignore[attr-defined]
    if config.get("tempdir"):
        return
    config["tempdir"] = directory = tempfile.mkdtemp(prefix=f"{SOCKET_PREFIX}{os.getpid()}-", dir=socket_base())
    _SOCKET_DIRS.append(directory)


def socket_base() -> str:
    """Where the socket's directory goes: the temporary directory, or where that is too long for a
    socket path, a short standard one, as Python 3.13 does."""
    base = tempfile.gettempdir()
    if len(base) + _SOCKET_NAME_LENGTH > SUN_PATH_MAX:
        base = next((d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(d) and os.access(d, os.W_OK)), base)
    return base


_SOCKET_DIRS: list[str] = []


def _own_forkserver() -> int | None:
    """The pid of the forkserver this process started, if it runs; never one a forked child
    (the catalogue report's worker) inherited the record of: that one serves its parent."""
    pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
    if pid is None:
        return None
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not this process's child
        return None
    return None if done else pid


def stop() -> None:
    """Stop the forkserver and the resource tracker multiprocessing started, and wait for both, so
    a command never returns while they still run; then remove the socket's directory.  Called at
    exit, after the pools have stopped their ranks.  The forkserver is ended, not asked: one still
    importing its :data:`PRELOAD` (a command that refused its arguments at once) would read the
    request only when done, seconds later."""
    pid = _own_forkserver()
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    for server in (getattr(forkserver, "_forkserver", None), getattr(resource_tracker, "_resource_tracker", None)):
        with contextlib.suppress(AttributeError, OSError, ChildProcessError, TypeError):  # TypeError: never started
            server._stop()  # type: ignore[union-attr]
    config = process.current_process()._config  # type: ignore[attr-defined]
    while _SOCKET_DIRS:
        directory = _SOCKET_DIRS.pop()
        shutil.rmtree(directory, ignore_errors=True)
        if config.get("tempdir") == directory:
            del config["tempdir"]


def start(*, compiling: bool = False) -> None:
    """Launch the forkserver now (it does its imports in the background); idempotent.
    ``compiling``: the command compiles its target (``--compile``), so the forkserver imports the
    compiler too (:data:`COMPILER_PRELOAD`).  In a command line's own process (:func:`share_imports`)
    that has no other thread, torch is imported here and the forkserver forked from this process."""
    if compiling and not _COMPILING:
        _COMPILING.append(True)
    context()
    if not (_SHARED and threading.active_count() == 1 and sys.platform.startswith("linux")):
        forkserver.ensure_running()
        return
    import torch  # noqa: F401  # the command imports it next in any case: the forkserver inherits it

    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    with _forked_here():
        forkserver.ensure_running()


#: Set by :func:`share_imports`.
_SHARED: list[bool] = []


def share_imports() -> None:
    """Say this process is a command line's own (:func:`harness.__main__.entry`): nothing of it has
    run yet that a forked process must not inherit (a computation's thread pool, open files), so
    its forkserver may be forked from it.  A process that runs the harness in-process (a test, a
    user's script) keeps the new interpreter multiprocessing starts."""
    if not _SHARED:
        _SHARED.append(True)


#: The source multiprocessing runs in the new interpreter it starts for the forkserver.
_SERVER_SOURCE = "from multiprocessing.forkserver import main"


@contextlib.contextmanager
def _forked_here() -> Iterator[None]:
    """While multiprocessing starts its forkserver: fork this process and run the server's source
    in the child, where it would start a new interpreter to run it.  Anything else it starts
    (the resource tracker) starts as usual."""
    spawn = util.spawnv_passfds

    def fork_instead(path: bytes, args: Sequence[Any], passfds: Sequence[int]) -> int:
        source = str(args[-1])
        if not source.startswith(_SERVER_SOURCE):
            return spawn(path, args, passfds)
        with warnings.catch_warnings():  # 3.12+: an idle BLAS thread, which forks safely (its own at-fork handlers)
            warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            util.spawnv_passfds = spawn  # what the server's own children start, they start as usual
            _serve(source, passfds)
        return pid

    util.spawnv_passfds = fork_instead
    try:
        yield
    finally:
        util.spawnv_passfds = spawn


def _serve(source: str, passfds: Sequence[int]) -> None:
    """In the forked child: become what a new interpreter running ``source`` would be, then run it;
    never return.  It keeps only the descriptors passed (the others are the driver's: the forkserver's
    alive pipe among them, which must close when the driver exits), holds none of the driver's locks,
    runs none of its signal handlers, and never collects or finalizes the driver's objects."""
    code = 1
    try:
        gc.freeze()
        keep = {0, 1, 2, *passfds}
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        tracker = resource_tracker._resource_tracker
        for name, value in (("_lock", threading.RLock()), ("_fd", None), ("_pid", None)):  # as never started
            setattr(tracker, name, value)
        forkserver._forkserver._lock = threading.Lock()  # type: ignore[attr-defined]  # held in the driver now
        # the driver's socket directory is the driver's to remove: a process forked from the server
        # (the report's worker) makes its own, as it does from a new interpreter
        process.current_process()._config.pop("tempdir", None)  # type: ignore[attr-defined]
        _SOCKET_DIRS.clear()
        _STOP_REGISTERED.clear()
        for sig in signal.valid_signals():
            if callable(signal.getsignal(sig)) and sig != signal.SIGINT:  # the server sets SIGINT's itself
                signal.signal(sig, signal.SIG_DFL)
        exec(compile(source, "<forkserver>", "exec"), {"__name__": "__mp_forkserver__"})
        code = 0
    except SystemExit:  # the driver has gone: the server's normal end
        code = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            sys.excepthook(*sys.exc_info())
            sys.stderr.flush()
    finally:
        os._exit(code)
