"""The messages between the pool controller and its rank processes.

Messages are ``(name, payload)`` pairs sent as pickled bytes, so tensors travel by value, never
through shared memory a dying rank would take with it: controller -> rank ``run`` / ``call`` /
``stop``; rank -> controller ``ready`` / ``result``; a remote rank answers ``stack`` on a side
connection while busy.  Imports only the standard library and torch.
"""

from __future__ import annotations

import ctypes
import io
import pickle
import zlib
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch


@dataclass(frozen=True)
class RankInit:
    """What a freshly started rank needs to join its group."""

    rank: int
    world_size: int
    backend: str
    device: str
    store_host: str
    store_port: int
    store_prefix: str
    group_timeout_s: float
    log_path: str
    stack_path: str
    sys_path: tuple[str, ...]
    cwd: str
    driver_pid: int


@dataclass(frozen=True)
class Entered:
    """One collective a rank entered: its place in the rank's sequence and what it was.

    ``key``: what must match on every rank of a group at this place (``""`` for point-to-point
    ops); ``peers``: its group's global ranks as ``"1,3"``, or ``""`` for the world.
    """

    seq: int
    key: str
    peers: str
    described: str


@dataclass(frozen=True)
class Ledger:
    """What a rank published: its recent entries, whether it has left the last one, and how
    many collectives it has entered on each process group (``peers`` -> count) in this case."""

    entries: list[Entered]
    returned: bool
    counts: dict[str, int]

    def by_seq(self) -> dict[int, Entered]:
        return {entry.seq: entry for entry in self.entries}

    def inside(self) -> Entered | None:
        """The collective the rank is blocked in, if any."""
        return None if self.returned or not self.entries else self.entries[-1]


#: Size of the shared-memory slot a local rank publishes its recent collectives in.
LEDGER_BYTES = 4096
#: How a ledger ends once the rank has left its last collective.
RETURNED = " (returned)"
#: In a rank's counts line during a batch: the index of the case it is on (never a group's peers).
BATCH_CASE = "case"
#: The ledger's count that says the rank is inside ``torch.compile`` (1) or not (absent): a rank
#: waiting on its compiler, or on a peer's compile lock, is busy, not hung.
COMPILING = "compiling"
#: The last line of a ledger: ``~`` and the CRC-32 of everything before it, in hex.
_CHECK = "\n~"
_CHECK_BYTES = len(_CHECK) + 8
#: How often a reader re-reads a slot it caught half-written before it takes it as unknown.
READ_TRIES = 20


def ledger_text(entries: list[Entered], returned: bool, counts: dict[str, int],
                limit: int = LEDGER_BYTES - 1) -> bytes:
    """A rank's ledger as text: per-group counts (``@peers=n;...``), the most recent ``entries``
    that fit in ``limit`` bytes as ``#seq|key|peers|described``, then a checksum line.

    The controller reads it while the rank rewrites it (:func:`read_slot`), unordered: a torn
    copy (seen under load: 3 in 77,628 reads) would look like a desync; the checksum tells it.
    """
    return ledger_from_lines([entry_line(entry) for entry in entries], returned, counts, limit)


def entry_line(entry: Entered) -> bytes:
    """One entry of a ledger's text, encoded: ``#seq|key|peers|described``."""
    return f"#{entry.seq}|{entry.key}|{entry.peers}|{entry.described}".encode()


def ledger_from_lines(lines: list[bytes], returned: bool, counts: dict[str, int], limit: int = LEDGER_BYTES - 1) -> bytes:
    """:func:`ledger_text` of entries already encoded as lines (:func:`entry_line`): a rank keeps
    its lines, and publishes on every collective it enters and leaves."""
    return sealed(ledger_body(lines, counts, limit), returned)


def ledger_body(lines: list[bytes], counts: dict[str, int], limit: int = LEDGER_BYTES - 1) -> tuple[bytes, bool]:
    """The counts line and the most recent ``lines`` that fit in ``limit`` with the marks
    :func:`sealed` adds, and whether the last entry is among them: what a rank's ledger holds
    between entering a collective and leaving it, built once for both."""
    head = ("@" + ";".join(f"{peers}={count}" for peers, count in counts.items())).encode()
    size = len(head) + 1 + len(RETURNED) + _CHECK_BYTES
    first = len(lines)
    while first > 0 and size + len(lines[first - 1]) + 1 <= limit:
        first -= 1
        size += len(lines[first]) + 1
    return b"\n".join([head, *lines[first:]]), first < len(lines)


def sealed(body: tuple[bytes, bool], returned: bool) -> bytes:
    """A :func:`ledger_body` as published: `` (returned)`` after the last entry once the rank has
    left it, then the checksum line."""
    text, holds_last = body
    text += RETURNED.encode() if returned and holds_last else b""
    return text + f"{_CHECK}{zlib.crc32(text):08x}".encode()


def read_slot(slot: Any) -> Ledger:
    """The ledger in a rank's shared slot, re-read while a copy is caught half-written; empty
    (nothing known) if no whole copy comes in :data:`READ_TRIES` reads."""
    for _ in range(READ_TRIES):
        ledger = read_ledger(slot.value)
        if ledger is not None:
            return ledger
    return Ledger([], False, {})


def read_ledger(raw: bytes) -> Ledger | None:
    """What a rank published (:func:`ledger_text`): empty for an empty slot, ``None`` for a copy
    whose checksum does not match (taken while the rank rewrote it)."""
    if not raw:
        return Ledger([], False, {})
    body, _, check = raw.rpartition(_CHECK.encode())
    if check != f"{zlib.crc32(body):08x}".encode():
        return None
    text = body.decode(errors="replace")
    returned = text.endswith(RETURNED)
    if returned:
        text = text[: -len(RETURNED)]
    entries, counts = [], {}
    for line in text.splitlines():
        if line.startswith("@"):
            pairs = (item.rpartition("=") for item in line[1:].split(";") if item)
            counts = {peers: int(count) for peers, _, count in pairs if count.isdigit()}
            continue
        fields = line.split("|", 3)
        if len(fields) == 4 and fields[0].startswith("#") and fields[0][1:].isdigit():
            entries.append(Entered(int(fields[0][1:]), fields[1], fields[2], fields[3]))
    return Ledger(entries, returned, counts)


def last_entered(ledger: Ledger) -> str:
    """The last collective of a ledger for people: ``#3 all_gather(...)``, `` (returned)`` if left."""
    if not ledger.entries:
        return "(none yet)"
    last = ledger.entries[-1]
    return f"#{last.seq} {last.described}" + (RETURNED if ledger.returned else "")


def send(conn: Connection, name: str, payload: Any) -> None:
    conn.send_bytes(encode(name, payload))


def encode(name: str, payload: Any) -> memoryview:
    """One message as bytes: pickled once, it can go to every rank (they then start closer together)."""
    buffer = io.BytesIO()
    _TensorPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((name, payload))
    return buffer.getbuffer()


def receive(conn: Connection) -> tuple[str, Any]:
    name, payload = pickle.loads(conn.recv_bytes())
    return name, payload


class _TensorPickler(pickle.Pickler):
    """Pickles dense CPU tensors as raw storage bytes plus their view geometry: torch's own
    reduction costs about ten times more per tensor."""

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor) or obj.device.type != "cpu" or obj.layout != torch.strided:
            return NotImplemented
        if obj.requires_grad or type(obj) is not torch.Tensor:
            return NotImplemented
        storage = obj.untyped_storage()
        raw = ctypes.string_at(storage.data_ptr(), storage.nbytes()) if storage.nbytes() else b""
        return _rebuild_tensor, (raw, str(obj.dtype).removeprefix("torch."), tuple(obj.shape), obj.stride(),
                                 obj.storage_offset())


def _rebuild_tensor(raw: bytes, dtype: str, shape: tuple[int, ...], stride: tuple[int, ...], offset: int) -> torch.Tensor:
    kind = getattr(torch, dtype)
    base = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    return base.view(kind).as_strided(shape, stride, offset)
