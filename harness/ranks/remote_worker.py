"""The rank side of scale-out: a process ``torchrun`` starts, serving one driver (see :mod:`harness.remote`).

It dials the driver, greets it on two connections, and serves cases on the main one with the
same loop as a local rank (:func:`harness.ranks.rank.serve`) while a thread answers the driver on
the side one.  Rank side: it imports nothing of the controller (``tests/test_house.py``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
import traceback
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any

from harness.core.errors import UsageError
from harness.ranks.protocol import receive, send
from harness.ranks.rank import CollectiveLog, die_with_parent, serve

AUTHKEY_ENV = "GATHER_HARNESS_AUTHKEY"
#: How long a rank keeps dialling a driver that does not answer.
DEFAULT_DIAL_TIMEOUT_S = 300.0


def parse_address(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``, meaning every interface) -> (host, port)."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"{option} {text!r}: expected HOST:PORT such as 0.0.0.0:0 (port 0: any free port)")
    return host.strip("[]") or "0.0.0.0", int(port_text)


def torchrun_identity() -> dict[str, Any]:
    """Who this rank is, from the environment torchrun sets; a usage error outside torchrun."""
    try:
        rank, world, local = (int(os.environ[name]) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    except (KeyError, ValueError):
        raise UsageError("RANK, WORLD_SIZE and LOCAL_RANK are not set: start harness.remote with torchrun "
                         "(torchrun ... -m harness.remote --driver HOST:PORT)") from None
    return {"rank": rank, "world_size": world, "local_rank": local, "host": socket.gethostname(), "pid": os.getpid()}


def _greet_driver(address: tuple[str, int], authkey: bytes, deadline: float, hello: dict) -> Connection:
    """Connect to the driver and say ``ready`` at once, retrying while nobody listens yet
    (``TimeoutError`` at the deadline)."""
    while True:
        try:
            conn = Client(address, family="AF_INET", authkey=authkey)
        except (ConnectionRefusedError, ConnectionResetError, EOFError, socket.gaierror):
            if time.monotonic() >= deadline:
                raise TimeoutError(address) from None
            time.sleep(0.5)
        else:
            send(conn, "ready", hello)
            return conn


def _main_stack(main_ident: int) -> str:
    frame = sys._current_frames().get(main_ident)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(main thread gone)"


def _answer_side(conn: Connection, log: CollectiveLog, main_ident: int) -> None:
    """The side thread: answer ``stack`` requests; end the process when the driver drops us (the
    main thread may be blocked in a collective that never completes)."""
    while True:
        try:
            name, _ = receive(conn)
        except (EOFError, OSError):
            print(f"gather-harness: the driver dropped this rank; its main thread was at:\n{_main_stack(main_ident)}"
                  f"last collective: {log.latest}", file=sys.stderr, flush=True)
            os._exit(1)
        if name == "stop":
            return
        send(conn, "stack", {"stack": _main_stack(main_ident), "ledger": log.text()})


def _read_address_file(path: str, deadline: float) -> str:
    """The ``HOST:PORT`` a driver wrote to ``path`` (atomically), once it is there."""
    while True:
        try:
            text = Path(path).read_text().strip()
        except FileNotFoundError:
            text = ""
        if text:
            return text
        if time.monotonic() >= deadline:
            raise UsageError(f"--driver-file {path}: no address appeared there; start the driver with "
                             f"--address-file {path} first")
        time.sleep(0.2)


def worker_main(argv: list[str] | None = None) -> int:
    """``torchrun ... -m harness.remote --driver HOST:PORT``: serve the driver until it stops us.

    Exit status 0 when the driver said stop (or, after a restart, is gone), 1 when it dropped
    this rank (torchrun then restarts the workers if it may), 2 on bad usage.
    """
    parser = argparse.ArgumentParser(prog="torchrun ... -m harness.remote",
                                     description="A rank serving a gather-harness driver (see harness.remote).")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--driver", metavar="HOST:PORT", help="the address the driver printed")
    where.add_argument("--driver-file", metavar="PATH",
                       help="read HOST:PORT from PATH, the driver's --address-file, waiting for it to appear")
    parser.add_argument("--connect-timeout", type=float, default=DEFAULT_DIAL_TIMEOUT_S, metavar="SECONDS",
                        help=f"how long to keep dialling the driver (default: {DEFAULT_DIAL_TIMEOUT_S:g})")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.connect_timeout
    try:
        driver = args.driver or _read_address_file(args.driver_file, deadline)
        address = parse_address(driver, "--driver")
        identity = torchrun_identity()
        authkey = os.environ.get(AUTHKEY_ENV, "").encode()
        if not authkey:
            raise UsageError(f"{AUTHKEY_ENV} is not set: export the key the driver printed")
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    die_with_parent(os.getppid())
    try:
        main_conn, side_conn = (_greet_driver(address, authkey, deadline, {**identity, "channel": channel})
                                for channel in ("main", "side"))
    except AuthenticationError:
        print(f"error: the driver at {driver} refused this rank: {AUTHKEY_ENV} differs from the driver's",
              file=sys.stderr)
        return 2
    except TimeoutError:
        restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0
        print(f"gather-harness: no driver answered at {driver} within {args.connect_timeout:g} s"
              + ("; the run is over" if restarted else ""), file=sys.stderr)
        return 0 if restarted else 1
    log = CollectiveLog(None)
    log.install()
    threading.Thread(target=_answer_side, args=(side_conn, log, threading.get_ident()), daemon=True,
                     name="gather-side-channel").start()
    return 0 if serve(main_conn, log) else 1
