"""What one rank does with one case: the one procedure behind every verdict, and every repro.

A rank rebuilds its input from the case, calls the target as its :class:`Call` says, runs the
backward pass with its own cotangent, calls it again on the companion input and on the same
input, and reports what it saw as a :class:`RankResult`.  It never judges:
:mod:`harness.core.checks` does, on the driver and, from the same sources, in a repro script.
Every rank makes every group of the layout, in order, before the case (:func:`make_groups`).

Embedded in repro scripts: imports only torch, the standard library and core modules, relatively.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from .case import Case, make_cotangent, make_input
from .contract import COLLECTIVES
from .conventions import Call
from .errors import Misfit
from .outputs import OUTPUTS, check_fits, describe_result, detect_output, fits, read


@dataclass(frozen=True)
class RunRequest:
    """Run ``target`` on a case, called as ``call`` says.

    - ``repeat``: call twice more, on the companion input (a shared output buffer would change
      the first result) and on the same input again (the same case must give the same bits).
    - ``detect``: the probe: call once, report the output convention the result fits
      (``declared``: the user's, ``""``: auto); with ``requires_grad``, whether it carries gradients.
    - ``reload``: execute the target's module again first: state kept from a failed case must
      not decide the next verdict.
    """

    case: Case
    target: str
    call: Call = field(default_factory=Call)
    check_grad: bool = False
    repeat: bool = True
    detect: bool = False
    declared: str = ""
    reload: bool = False
    requires_grad: bool = False


@dataclass(frozen=True)
class BatchRequest:
    """Cases run back to back on warm ranks and judged there, only a count coming back (the fuzz
    engine's batches, :meth:`harness.search.session._Session.sweep`): every case of one layout, the
    ranks stop at the first that fails on them (``bits``: judged with raw-byte identity too)."""

    requests: tuple[RunRequest, ...]
    bits: bool = True
    #: Report which gradient contracts each case's gradient matched (:attr:`BatchSummary.matched`).
    semantics: bool = False


@dataclass
class BatchSummary:
    """What one rank reports of a batch: how many cases passed before the first that did not,
    and of those what a usual run would have noted (:func:`harness.core.checks.outcome_notes`, the
    gradient contracts matched), so a search in batches says what a search case by case says."""

    passed: int = 0
    #: A passing case wrote into its input where no gradient was checked (the in-place note).
    written: bool = False
    #: Per passing case, with ``semantics``: the contracts this rank's gradient matched, ``None``
    #: where the case says nothing about them (no gradient, this rank idle).
    matched: list[frozenset[str] | None] = field(default_factory=list)


@dataclass
class RankResult:
    """Everything one rank observed; tensors are detached CPU copies with their strides kept.

    ``output``: the result's pieces right after the first call; ``output_later``: the same tensors
    after the backward pass and the further calls (a shared buffer shows as a difference).
    """

    rank: int
    idle: bool = False
    device: str = "cpu"
    output: list[torch.Tensor | None] | None = None
    output_devices: list[str] = field(default_factory=list)
    output_requires_grad: bool = False
    output_later: list[torch.Tensor | None] | None = None
    companion_output: list[torch.Tensor | None] | None = None
    repeat_output: list[torch.Tensor | None] | None = None
    grad: torch.Tensor | None = None
    grad_device: str | None = None
    input_after: torch.Tensor | None = None
    input_stride_after: tuple[int, ...] | None = None
    #: The target returned nothing and left its result in its input, as ``dist.all_reduce(x)`` does
    #: (a collective that may, :attr:`harness.core.contract.Collective.in_place`): x is the result.
    in_place: bool = False
    #: The target returned a work handle with its result (``async_op=True``): it was waited on before
    #: the result was read, as the caller must (:func:`harness.core.outputs.settle`).
    waited: bool = False
    #: The input's version counter (``x._version``) before and after the first call: a call
    #: that writes into ``x`` in place bumps it, even when it writes the same values back.
    input_version: tuple[int, int] | None = None
    detected: str = ""
    misfit: str = ""
    #: Why no backward pass ran though the case has gradients (:func:`_no_backward`), or ``""``.
    no_backward: str = ""
    #: The probe's reading of a one-tensor result: its shape (another collective's shape says
    #: the contract is wrong, :func:`harness.search.probe.probe`).
    detected_shape: tuple[int, ...] | None = None
    error: str | None = None
    error_type: str | None = None
    error_phase: str | None = None
    collectives: list[str] = field(default_factory=list)
    #: Operations the backend counted in this case beyond the recorded ``collectives``
    #: (functional collectives, ones autograd or a helper issues inside torch): the ledger
    #: could not compare their payloads between ranks.
    unrecorded: int = 0
    bytes_sent: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    leaked: list[str] = field(default_factory=list)
    value: Any = None  # the return value of a helper ``call``
    #: Each process group this rank belongs to (by name) -> its global ranks and how many
    #: operations the rank has issued on it; ``None`` where the backend does not say.
    sequences: dict[str, tuple[tuple[int, ...], int]] | None = None

    def error_line(self) -> str:
        """The exception as ``Type: message``: the first unindented line after the last frame, not
        the traceback's last line (a message of several lines, such as CUDA's, ends with a hint)."""
        lines = self.error.strip().splitlines() if self.error else []
        frames = [n for n, line in enumerate(lines) if line.startswith("  File ")]
        after = lines[frames[-1] + 1:] if frames else lines
        return next((line for line in after if line and not line[0].isspace()), lines[-1] if lines else "")


# -- groups ----------------------------------------------------------------------------------------

_GROUPS: dict[tuple[int, ...], Any] = {}
#: Threads and file descriptors the groups of :func:`make_groups` opened in this process: their
#: connections are the harness's, never a target's leak, whenever they are made.
_MADE = [0, 0]


def make_groups(layout: tuple[tuple[int, ...], ...]) -> None:
    """Create every process group of ``layout`` this process has not made yet, in order.

    Every rank runs it for the same layouts in the same order, so ranks never disagree on the
    next ``new_group``.  The controller runs it before a case, with its own wait, so a slow group
    never reads as the target hanging; what it opens is never the target's (:func:`_process_resources`).
    """
    world = tuple(range(dist.get_world_size()))
    before = _all_resources()
    for members in layout:
        if members not in _GROUPS:
            _GROUPS[members] = dist.group.WORLD if members == world else dist.new_group(list(members))
    after = _all_resources()
    _MADE[0] += after[0] - before[0]
    _MADE[1] += after[1] - before[1]


def made_group(members: tuple[int, ...]) -> Any:
    """The group :func:`make_groups` made over ``members`` (global ranks)."""
    return _GROUPS[members]


def group_for(case: Case, rank: int) -> Any:
    """This rank's process group for ``case`` (``None``: no group is passed), made first if need be
    (a repro script, which has no controller to make it before)."""
    if not case.groups:
        return None
    make_groups(case.groups)
    return _GROUPS.get(case.members(rank))


# -- the procedure -----------------------------------------------------------------------------------


def run_case(request: RunRequest, rank: int, target: Any, device: str) -> RankResult:
    """Run ``request`` on this rank and report what was observed: anything the target raises
    (``SystemExit`` too) with its phase; global state it may change is put back afterwards."""
    case, call = request.case, request.call
    result = RankResult(rank=rank, device=device)
    phase = "setup"
    baseline: tuple[int, int] | None = None  # taken once the groups are made: their connections are the harness's
    compiled_before = 0
    try:
        group = group_for(case, rank)
        baseline = _process_resources()
        compiled_before = compiles()
        if case.idle(rank):
            result.idle = True
            return result
        world = len(case.members(rank))
        sizes = split_sizes(case, rank)
        x = make_input(case, rank, requires_grad=request.check_grad or request.requires_grad, device=device)
        stride_before, version_before = x.stride(), x._version
        phase = "forward"
        started = time.perf_counter()
        def called_on(tensor: torch.Tensor) -> Any:
            handles: list[Any] = []
            y = call.invoke(target, tensor, case.dim, group, pass_group=case.passes_group, sizes=sizes,
                            scatter_dim=case.scatter_dim, op=case.op, root=case.root, waited=handles)
            result.waited = result.waited or bool(handles)
            if y is None and COLLECTIVES[case.collective].in_place:  # dist.all_reduce(x): the result is x
                result.in_place = True
                return tensor
            return y

        y = called_on(x)
        result.timings["forward_s"] = time.perf_counter() - started
        result.input_version = (version_before, x._version)
        if not case.judged(rank) and not request.check_grad:  # a reduce's other members: anything goes
            phase = "repeat"
            _repeat(result, request, case, rank, device, called_on, x)
            result.input_after = _cpu(x)
            return result
        if request.detect:
            _detect(result, y, x, world, case, request.declared)
            result.output_requires_grad = carries_grad(y)
            return result
        reading = read(y, case.output, world, case.dim)
        result.output, result.output_devices = _copies(reading.pieces), [str(t.device) for t in reading.pieces]
        result.output_requires_grad = reading.flowing.requires_grad
        if request.check_grad:
            phase = "backward"
            cotangent = make_cotangent(case, rank, device=device)
            result.no_backward = _no_backward(reading.flowing, cotangent)
            result.grad = None if result.no_backward else _gradient(reading.flowing, x, cotangent)
            result.grad_device = None if result.grad is None else device_of(result.grad)
            result.grad = None if result.grad is None else _cpu(result.grad)
        phase = "repeat"
        _repeat(result, request, case, rank, device, called_on, x, reading.pieces)
        result.input_after = _cpu(x)
        result.input_stride_after = tuple(x.stride()) if x.stride() != stride_before else None
    except BaseException as exc:  # report everything, including SystemExit from a variant
        record_error(result, exc, phase)
    finally:
        restore_globals()
        compiled = compiles() != compiled_before  # a compile's workers are torch's, kept for the next compile
        result.leaked = ([] if baseline is None or compiled else _leaks(baseline)) + (
            _device_left_broken(device) if result.error else [])
    return result



def _repeat(result: RankResult, request: RunRequest, case: Case, rank: int, device: str,
            called_on: Callable[[torch.Tensor], Any], x: torch.Tensor, first: list[torch.Tensor] | None = None) -> None:
    """The stability calls, where asked: on the companion input, then the same call again (on a
    fresh x where the first call left its result in x).  A member whose result is not judged (a
    reduce's, a gather-to's other members) makes them unread: the collective needs every member."""
    if not request.repeat:
        return
    world = len(case.members(rank))
    second = called_on(make_input(case, rank, device=device, companion=True))
    if first is not None:  # copied at once: a result may be a view the next call overwrites
        result.companion_output = _copies(read(second, case.output, world, case.dim).pieces)
        result.output_later = _copies(first)
    third = called_on(make_input(case, rank, device=device) if result.in_place else x)
    if first is not None:
        result.repeat_output = _copies(read(third, case.output, world, case.dim).pieces)


def record_error(result: RankResult, exc: BaseException, phase: str) -> RankResult:
    """Note in ``result`` that ``exc`` was raised in ``phase``, with its traceback."""
    result.error = "".join(traceback.format_exception(exc))
    result.error_type = type(exc).__name__
    result.error_phase = phase
    return result


def device_of(t: torch.Tensor) -> str:
    """``cpu``, ``meta`` or ``cuda:k``: the device with its index, as the device property compares it."""
    return str(t.device)


def split_sizes(case: Case, rank: int) -> dict[str, list[int]]:
    """The split-size arguments of ``rank`` by role: a reduce-scatter's slot lengths, an
    all-to-all's rows sent to and received from each member (``{}`` for a gather)."""
    if COLLECTIVES[case.collective].slotted:
        return {"split_sizes": case.slot_sizes(rank)}
    if case.collective == "all-to-all":
        return {"input_split_sizes": list(case.ranks[rank].splits),
                "output_split_sizes": [case.sent_rows(sender, rank) for sender in case.members(rank)]}
    return {}


def _detect(result: RankResult, y: Any, x: torch.Tensor, world: int, case: Case, declared: str) -> None:
    """The probe's reading: which convention ``y`` fits, or why none does."""
    dim = case.dim
    try:
        if case.collective != "gather":
            result.detected = _neighbour_output(y, case, world, declared)
        elif declared:
            check_fits(y, declared, x, world, dim)
            result.detected = declared
        else:
            result.detected = detect_output(y, x, world, dim)
    except Misfit as misfit:
        result.misfit = str(misfit)
    if isinstance(y, torch.Tensor):
        result.detected_shape = tuple(y.shape)


def _neighbour_output(y: Any, case: Case, world: int, declared: str) -> str:
    """The reading of a reduce-scatter's or an all-to-all's result: the declared one, else the
    first of its collective's that fits (all-to-all: one tensor, or one per member)."""
    allowed = (declared,) if declared else COLLECTIVES[case.collective].outputs
    found = next((output for output in allowed if fits(y, output, world)), None)
    if found is None:
        what = " or ".join(OUTPUTS[output].expects.format(world=world) for output in allowed)
        raise Misfit(f"returned {describe_result(y)}, but a {case.collective} should return {what}")
    return found


def carries_grad(result: Any) -> bool:
    """Whether ``result`` (a tensor, or a tuple or list holding some) has a tensor that requires grad."""
    if isinstance(result, torch.Tensor):
        return result.requires_grad
    return isinstance(result, (list, tuple)) and any(carries_grad(item) for item in result)


def _no_backward(flowing: torch.Tensor, cotangent: torch.Tensor) -> str:
    """Why no backward pass can run from the result, or ``""``: one of the wrong shape cannot take
    the reference's cotangent (the shape is the finding)."""
    if tuple(flowing.shape) != tuple(cotangent.shape):
        return f"shape: the output's shape {tuple(flowing.shape)} is not the contract's {tuple(cotangent.shape)}"
    if not flowing.requires_grad:
        return "grad: the output does not require grad, so no gradient flows back to x"
    return ""


def _gradient(flowing: torch.Tensor, x: torch.Tensor, cotangent: torch.Tensor) -> torch.Tensor | None:
    (grad,) = torch.autograd.grad(flowing, x, cotangent, allow_unused=True)
    return grad


def _copies(pieces: list[torch.Tensor]) -> list[torch.Tensor | None]:
    return [_cpu(t) for t in pieces]


def _cpu(t: torch.Tensor) -> torch.Tensor | None:
    """A detached CPU copy with the same strides; ``None`` for a meta tensor (no values)."""
    if t.device.type == "meta":
        return None
    return t.detach().to("cpu", copy=True) if t.device.type != "cpu" else t.detach().clone()


# -- what a target can leave behind ---------------------------------------------------------------


def restore_globals() -> None:
    """Undo the global torch state targets are seen to flip, so it cannot leak into the next case."""
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)
    torch.set_default_device(None)
    if torch.is_anomaly_enabled():
        torch.autograd.set_detect_anomaly(False)
    if torch.are_deterministic_algorithms_enabled():  # switching it imports torch._inductor: only when needed
        torch.use_deterministic_algorithms(False)


def _all_resources() -> tuple[int, int]:
    return threading.active_count(), _open_fds()


def _process_resources() -> tuple[int, int]:
    """Threads and file descriptors open, less those of the harness's groups (:data:`_MADE`)."""
    threads, fds = _all_resources()
    return threads - _MADE[0], fds - _MADE[1]


def compiles() -> int:
    """How many frames ``torch.compile`` has compiled in this process: a case that compiled leaves
    the compiler's threads and pipes behind by design, no leak of the target's."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    return 0 if dynamo is None else sum(dynamo.counters["frames"].values())


def _leaks(baseline: tuple[int, int]) -> list[str]:
    """Threads and file descriptors the call left behind (the pool replaces such a rank)."""
    threads, fds = _process_resources()
    leaked = []
    if threads > baseline[0]:
        leaked.append(f"{threads - baseline[0]} thread(s) still running")
    if fds > baseline[1]:
        leaked.append(f"{fds - baseline[1]} file descriptor(s) open")
    return leaked


def _device_left_broken(device: str) -> list[str]:
    """A CUDA error is sticky: a rank whose device no longer synchronizes must not run the next
    case, where its error would be put down to another target (asked after a case that raised)."""
    if not device.startswith("cuda"):
        return []
    try:
        torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - any error here means the device is unusable
        return [f"the CUDA device unusable ({' '.join(str(exc).split())[:200]})"]
    return []


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0
