"""The driver side of scale-out: serve cases to ranks that ``torchrun`` started (see :mod:`harness.remote`).

:class:`RemotePool` listens for the ranks, forms their group, and runs cases on them as a
local pool runs its own (:class:`RemoteRankSet` is a :class:`~harness.pool.rankset.RankSet` whose
ranks are connections, not child processes).
"""
from __future__ import annotations

import atexit
import os
import secrets
import socket
import struct
import sys
import time
from collections.abc import Callable
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge, wait
from typing import Any

from harness.core.case import Case
from harness.core.errors import PoolError, PoolGone, UsageError
from harness.core.procedure import RankResult
from harness.pool.evidence import STACK_WAIT_S
from harness.pool.faults import RankFault
from harness.pool.machine import group_timeout_s
from harness.pool.pool import Pool
from harness.pool.rankset import RankSet
from harness.ranks import rank_calls
from harness.ranks.protocol import Entered, ledger_text, receive, send
from harness.ranks.remote_worker import AUTHKEY_ENV, parse_address
from harness.settings import files
from harness.settings.options import CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S

#: How long a new connection may take to authenticate and say ``ready``.
HANDSHAKE_S = 10.0
#: How long the ranks may take to form their process group once all are connected.
JOIN_TIMEOUT_S = 300.0
DEFAULT_CONNECT_TIMEOUT_S = CONNECT_TIMEOUT_S
DEFAULT_RECONNECT_TIMEOUT_S = 120.0


# -- addresses and keys ----------------------------------------------------------------------------


def driver_authkey() -> tuple[bytes, bool]:
    """The shared key from ``GATHER_HARNESS_AUTHKEY``, or a fresh one; and whether it is fresh."""
    given = os.environ.get(AUTHKEY_ENV)
    return (given.encode(), False) if given else (secrets.token_hex(16).encode(), True)


def _shown_host(host: str) -> str:
    """The name ranks should dial: this machine's for a wildcard bind, else the bound host."""
    return socket.getfqdn() if host in ("", "0.0.0.0", "::") else host


def _receive_timeout(fd: int, seconds: float) -> None:
    """Bound (or, with 0, unbound) blocking reads on a socket fd without making it non-blocking."""
    sock = socket.socket(fileno=fd)
    try:
        whole = int(seconds)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", whole, int((seconds - whole) * 1e6)))
    finally:
        sock.detach()


# -- the driver side -------------------------------------------------------------------------------


class Rendezvous:
    """The driver's listening socket: authenticated connections from ranks, each with its ``ready``.

    Accepting happens only while the driver waits for ranks, in its own thread, with a
    deadline; a peer that connects but does not authenticate within :data:`HANDSHAKE_S` is
    dropped with a warning, never waited for.
    """

    def __init__(self, host: str, port: int, authkey: bytes, warn: Callable[[str], None]) -> None:
        try:
            self.sock = socket.create_server((host, port), backlog=128)
        except OSError as exc:
            raise UsageError(f"--listen {host}:{port}: cannot listen there ({exc.strerror or exc})") from None
        self.host = host
        self.authkey = authkey
        self.warn = warn

    @property
    def address(self) -> str:
        """``host:port`` as ranks should dial it."""
        return f"{_shown_host(self.host)}:{self.sock.getsockname()[1]}"

    def accept(self, deadline: float) -> tuple[Connection, dict] | None:
        """The next authenticated rank connection and its greeting; ``None`` at the deadline."""
        while (remaining := deadline - time.monotonic()) > 0:
            self.sock.settimeout(remaining)
            try:
                raw, peer = self.sock.accept()
            except TimeoutError:
                return None
            greeted = self._greet(raw, peer)
            if greeted is not None:
                return greeted
        return None

    def _greet(self, raw: socket.socket, peer: Any) -> tuple[Connection, dict] | None:
        raw.setblocking(True)
        conn = Connection(raw.detach())
        _receive_timeout(conn.fileno(), HANDSHAKE_S)
        try:
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            name, hello = receive(conn)
            if name != "ready" or not isinstance(hello, dict):
                raise EOFError(f"it sent {name!r} instead of ready")
        except AuthenticationError:
            self.warn(f"rejected a connection from {peer[0]}: its {AUTHKEY_ENV} differs from the driver's")
        except (OSError, EOFError, ValueError) as exc:
            self.warn(f"dropped a connection from {peer[0]} that did not greet as a rank: {exc}")
        else:
            _receive_timeout(conn.fileno(), 0)
            return conn, hello
        conn.close()
        return None

    def close(self) -> None:
        self.sock.close()


class _Latest:
    """What a local rank's shared last-collective slot offers (``.value``), filled in on demand."""

    value: bytes = b""


class RemoteRankSet(RankSet):
    """The W ranks of a torchrun job as one set; same ``run``/``call`` as a local :class:`RankSet`.

    It cannot start or kill processes: after a fault :meth:`kill` abandons the ranks (they
    exit, and torchrun may start new ones), and the pool waits for the next set.
    """

    def __init__(self, pool: RemotePool, mains: list[Connection], sides: list[Connection], hosts: list[str],
                 generation: int) -> None:
        super().__init__(pool, pool.backend, pool.device, len(mains), generation)  # type: ignore[arg-type]
        self.conns, self.sides, self.hosts = mains, sides, hosts
        self.last = [_Latest() for _ in mains]

    def stop(self) -> None:
        """Tell every rank the job is over: each exits with status 0, and so does torchrun."""
        for side in self.sides:
            _send_quietly(side, "stop")
        super().stop()

    def kill(self) -> None:
        super().kill()
        for side in self.sides:
            side.close()
        self.sides = []

    def _sentinels(self) -> dict[Any, int]:
        return {}  # a remote rank's death shows as its connection closing

    def _dead(self) -> list[bool]:
        return [r in self.closed for r in range(self.world_size)]

    def _alive(self, r: int) -> bool:
        return r not in self.closed

    def _usage(self, r: int) -> tuple[float, bool] | None:
        return None  # another machine's process: its timeout is the whole wait

    def _death(self, r: int, last: str, log_offsets: list[int]) -> RankFault:
        return RankFault(r, "died", last_collective=last,
                         log_tail=f"its connection closed; the torchrun output on {self.hosts[r]} says why")

    def _diagnose(self, results: list[RankResult | None], log_offsets: list[int]) -> list[RankFault]:
        for r, res in enumerate(results):
            if res is not None and res.collectives:
                entered = Entered(len(res.collectives), "", "", res.collectives[-1])
                self.last[r].value = ledger_text([entered], returned=True, counts={"": len(res.collectives)})
        return super()._diagnose(results, log_offsets)

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        """Ask each blocked rank's side thread for its main thread's stack and last collective."""
        asked = {self.sides[r]: r for r in ranks if _send_quietly(self.sides[r], "stack")}
        stacks: dict[int, str] = {}
        deadline = time.monotonic() + STACK_WAIT_S
        while asked and (remaining := deadline - time.monotonic()) > 0:
            for conn in wait(list(asked), timeout=remaining):
                r = asked.pop(conn)  # type: ignore[call-overload]  # wait() returns what it was given
                try:
                    _, reply = receive(conn)  # type: ignore[arg-type]
                except (EOFError, OSError):
                    continue
                stacks[r] = reply["stack"]
                self.last[r].value = reply["ledger"]
        return stacks


class RemotePool(Pool):
    """A pool whose one rank set is a torchrun job's ranks, dialling in to this driver.

    - ``listen``: ``HOST:PORT`` to listen on (port 0: any free port).
    - ``backend``, ``device``: the group the ranks form; every case must use them.
    - ``world_size``: the job's size if known (a job of another size is refused at once).
    - ``connect_timeout``: how long to wait for the job's ranks at first;
      ``reconnect_timeout``: for torchrun to bring them back after a fault.
    - ``address_file``: also write the address there (for scripts and shared file systems).

    ``call`` runs on all the job's ranks whatever world size it names: helpers such as the
    capability measurement work at any size.
    """

    def __init__(self, listen: str = "127.0.0.1:0", *, backend: str = "gloo", device: str = "cpu",
                 world_size: int | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
                 reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT_S, authkey: bytes | None = None,
                 address_file: str | None = None, announce: Callable[[str], None] | None = None) -> None:
        self.announce = announce or _to_stderr
        fresh = False
        if authkey is None:
            authkey, fresh = driver_authkey()
        self.rendezvous = Rendezvous(*parse_address(listen, "--listen"), authkey, self.announce)
        self.backend, self.device, self.world_size = backend, device, world_size
        self.timeout = timeout
        #: The torchrun job's groups are made for this pool's one case timeout, the check's.
        self.longest_timeout = timeout
        self.connect_timeout, self.reconnect_timeout = connect_timeout, reconnect_timeout
        self.current: RemoteRankSet | None = None
        self.generation = 0
        self.token = f"gather-harness-{secrets.token_hex(4)}"  # this driver's store keys
        self.gone = ""
        self.last_fault = ""
        self.closed = False
        if address_file:
            files.write_atomically(address_file, self.address + "\n")
        self.announce(self.instructions(authkey.decode() if fresh else None))
        atexit.register(self.close)

    @property
    def address(self) -> str:
        return self.rendezvous.address

    def instructions(self, fresh_key: str | None) -> str:
        """What to tell the user: where to point the ranks, and the key if it was generated."""
        key = f"{AUTHKEY_ENV}={fresh_key}" if fresh_key else f"{AUTHKEY_ENV} set as here, and"
        return (f"waiting for ranks on {self.address} ({self.backend}/{self.device}); on every node run, with {key}\n"
                f"  torchrun --nnodes N --nproc-per-node P --rdzv-backend c10d --rdzv-endpoint NODE0:29400 "
                f"--max-restarts 100 -m harness.remote --driver {self.address}")

    def rank_set(self, backend: str, device: str, world_size: int) -> RemoteRankSet:
        """The job's set, connecting (again) first if there is none or the last one broke."""
        if self.closed:
            raise PoolError("the pool is closed")
        if self.gone:
            raise PoolGone(self.gone)
        if self.current is None or self.current.broken:
            self.current = self._connect(first=self.current is None)
        return self.current

    def existing(self, backend: str, device: str, world_size: int) -> RemoteRankSet | None:
        return None if self.current is None or self.current.broken else self.current

    def fresh(self, case: Case) -> None:
        """Remote ranks cannot be replaced at will (each costs a torchrun restart): the target's
        module is executed afresh instead."""
        self.forget_state(case)

    def run(self, case: Any, target: str, **options: Any) -> Any:
        """As :meth:`Pool.run`; the case must fit the job (its size, backend and device)."""
        ranks = self.rank_set(case.backend, case.device, case.world_size)
        if (case.backend, case.device, case.world_size) != (self.backend, self.device, ranks.world_size):
            raise PoolError(f"a {case.backend}/{case.device} case of {case.world_size} ranks cannot run on a "
                            f"{self.backend}/{self.device} torchrun job of {ranks.world_size} ranks")
        outcome = super().run(case, target, **options)
        if outcome.fault:
            self.last_fault = f"{outcome.fault} on case {case.describe()}"
        return outcome

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.current is not None and not self.current.broken:
            self.current.stop()
        self.rendezvous.close()

    def __enter__(self) -> RemotePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connecting ---------------------------------------------------------------------------
    def _connect(self, first: bool) -> RemoteRankSet:
        """Accept main and side connections until every rank of the job has both, then join."""
        timeout_s = self.connect_timeout if first else self.reconnect_timeout
        deadline = time.monotonic() + timeout_s
        channels: dict[str, dict[int, Connection]] = {"main": {}, "side": {}}
        hosts: dict[int, str] = {}
        while self.world_size is None or min(map(len, channels.values())) < self.world_size:
            greeted = self.rendezvous.accept(deadline)
            if greeted is None:
                _close_all(channels)
                raise self._give_up(first, len(hosts), timeout_s)
            conn, hello = greeted
            rank = self._admit(hello, channels)
            channels[hello["channel"]][rank] = conn
            hosts[rank] = str(hello.get("host", "?"))
        self.generation += 1
        order = range(self.world_size)
        ranks = RemoteRankSet(self, [channels["main"][r] for r in order], [channels["side"][r] for r in order],
                              [hosts[r] for r in order], self.generation)
        self._join(ranks)
        return ranks

    def _admit(self, hello: dict, channels: dict[str, dict[int, Connection]]) -> int:
        """Check a greeting against the job; a rank greeting again replaces its older connection."""
        world, rank, channel = hello.get("world_size"), hello.get("rank"), hello.get("channel")
        if channel not in channels or not isinstance(world, int) or not isinstance(rank, int) or not 0 <= rank < world:
            raise PoolError(f"a peer greeted with rank={rank!r}, world_size={world!r}, channel={channel!r}: "
                            f"not a harness.remote rank")
        if self.world_size is None:
            self.world_size = world
        if world != self.world_size:
            raise PoolError(f"a rank of a torchrun job of {world} ranks connected, but the job has "
                            f"{self.world_size} (--world-sizes must be the job's nnodes x nproc-per-node)")
        old = channels[channel].pop(rank, None)
        if old is not None:
            old.close()
        return rank

    def _give_up(self, first: bool, connected: int, timeout_s: float) -> PoolError | PoolGone:
        """The error to raise when the ranks did not (re)connect in time."""
        expected = self.world_size or "the job's"
        if first:
            return PoolError(f"{connected} of {expected} ranks connected to {self.address} within {timeout_s:.0f} s; "
                            f"start the torchrun job with --driver {self.address}")
        self.gone = (f"the torchrun job's ranks did not come back within {timeout_s:.0f} s after a fault "
                     f"({self.last_fault or 'a rank failed'}); give torchrun --max-restarts so that it restarts "
                     f"them, or restart the job")
        raise PoolGone(self.gone)

    def _join(self, ranks: RemoteRankSet) -> None:
        args = (self.backend, self.device, group_timeout_s(self.longest_timeout), f"{self.token}-g{self.generation}/")
        results = ranks.call(rank_calls.address(rank_calls.join_group), args, JOIN_TIMEOUT_S)
        failed = [res for res in results if res is None or res.error]
        if failed:
            reason = failed[0].error_line() if failed[0] is not None else "a rank died"
            raise PoolError(f"the torchrun job's ranks could not form a {self.backend}/{self.device} group: {reason}")


def _close_all(channels: dict[str, dict[int, Connection]]) -> None:
    for conns in channels.values():
        for conn in conns.values():
            conn.close()


def _send_quietly(conn: Connection, name: str) -> bool:
    """Send ``name`` unless the connection is already gone; say whether it went."""
    try:
        send(conn, name, None)
    except OSError:
        return False
    return True


def _to_stderr(text: str) -> None:
    print(f"gather-harness: {text}", file=sys.stderr, flush=True)
