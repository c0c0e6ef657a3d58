"""The messages between the pool controller and its rank processes.

Messages are ``(name, payload)`` pairs sent as pickled bytes (plain :mod:`pickle`, so tensors
travel by value and never through shared memory that a dying rank would take with it).
The set is closed: controller -> rank ``run`` / ``call`` / ``stop``; rank -> controller
``ready`` / ``result``.  A remote rank (``harness.remote``) has a second, side connection on
which the controller may ask ``stack`` while the rank is busy and the rank answers ``stack``
(its main thread's stack and last collective).  This module imports only the standard
library and torch.
"""

from __future__ import annotations

import ctypes
import io
import pickle
from dataclasses import dataclass, field
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
class RunRequest:
    """Run ``target`` on a case: forward, optional backward, optional further calls.

    With ``repeat`` the rank calls the target twice more: on the companion input (every
    bit inverted: a shared output buffer would change the first result) and on the
    original input again (the same case must give the same bits).
    """

    case: Any  # harness.case.Case (kept untyped so this module stays import-light)
    target: str
    check_grad: bool
    repeat: bool = True


@dataclass
class RankResult:
    """Everything one rank observed; tensors are detached CPU copies with their strides kept.

    ``output`` is the first call's result as copied right after that call; ``output_later``
    is the same tensor object as it reads after the backward pass and the further calls (a
    shared buffer shows up as a difference); ``companion_output`` is the result on the
    companion input and ``repeat_output`` the third call's, on the original input again.
    """

    rank: int
    output: Any = None
    output_device: str | None = None
    output_requires_grad: bool = False
    output_later: Any = None
    companion_output: Any = None
    repeat_output: Any = None
    grad: Any = None
    input_after: Any = None
    input_stride_after: tuple[int, ...] | None = None
    error: str | None = None
    error_type: str | None = None
    error_phase: str | None = None
    collectives: list[str] = field(default_factory=list)
    bytes_sent: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    value: Any = None  # the return value of a ``call``


def send(conn: Connection, name: str, payload: Any) -> None:
    buffer = io.BytesIO()
    _TensorPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((name, payload))
    conn.send_bytes(buffer.getbuffer())


def receive(conn: Connection) -> tuple[str, Any]:
    name, payload = pickle.loads(conn.recv_bytes())
    return name, payload


class _TensorPickler(pickle.Pickler):
    """Pickles dense CPU tensors as raw storage bytes plus their view geometry.

    torch's own reduction goes through ``torch.save`` and costs about ten times more per
    tensor; results carry several small tensors per rank per case.
    """

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
