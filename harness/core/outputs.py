"""Output conventions: the ways a target's result reads (``--output``), and reading one.

:data:`OUTPUTS` is the one table of them.  It is read where options are parsed, which never
import torch (a mistyped option is answered in milliseconds), so torch is imported inside the
functions that read a result, where a rank has it already.

Embedded in repro scripts: it imports only torch and the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Misfit

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Output:
    """One way a target's result reads (``--output``), as every module that reads one needs it."""

    name: str
    #: What the result is, for ``--output``'s help.
    means: str
    #: What a result must be to read this way, for a misfit's message (``{world}``: the world size).
    expects: str
    #: W per-rank pieces, each compared with its rank's input (else one tensor).
    per_rank: bool = False
    #: The result is a sequence whose first element is what is compared.
    picks_first: bool = False
    #: The group's inputs stacked, ``(W, ...)``, not concatenated: equal shapes only, 0-d ones too.
    stacked: bool = False

    @property
    def one_tensor(self) -> bool:
        """The result is itself the one tensor compared (not a sequence of tensors)."""
        return not (self.per_rank or self.picks_first)

    def piece_names(self, count: int) -> list[str]:
        """How messages name the pieces of a result: ``output``, ``output[0]``, or ``output[s]`` per rank."""
        if self.per_rank:
            return [f"output[{k}]" for k in range(count)]
        return ["output[0]" if self.picks_first else "output"]


#: The output conventions, the one table of them.
OUTPUTS: dict[str, Output] = {output.name: output for output in (
    Output("tensor", "the concatenation along dim", "a Tensor"),
    Output("list", "W per-rank tensors (a gather: each rank's x; an all-to-all: the rows from each)",
           "a list or tuple of {world} Tensors", per_rank=True),
    Output("stack", "a (W, ...) tensor", "a Tensor", stacked=True),
    Output("first", "a tuple starting with the result, e.g. (out, handle) (a gather: the concatenation)",
           "a tuple whose first element is a Tensor", picks_first=True),
)}


def is_handle(item: Any) -> bool:
    """Whether ``item`` is a work handle (what ``async_op=True`` returns) or a future: not a tensor,
    and it has ``wait()`` (funcol's ``AsyncCollectiveTensor`` is a tensor, and waits when read)."""
    import torch

    return not isinstance(item, torch.Tensor) and callable(getattr(item, "wait", None))


def settle(result: Any) -> tuple[Any, list[Any]]:
    """``result`` as its caller reads it, and the handles waited on for that: a result that comes with
    a work handle (``async_op=True``) is defined only once the handle is waited on, so every handle in
    it is waited on first, as the caller must; a lone handle is read as ``None`` (the result is in x,
    or in the list the target filled).  The structure is kept: ``(out, handle)`` reads as ``first``."""
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    handles = [item for item in items if is_handle(item)]
    for handle in handles:
        handle.wait()
    return (None if is_handle(result) else result), handles


def describe_result(result: Any) -> str:
    """What came back, in a few words: ``a Tensor of shape (4,)``, ``a tuple of 2 Tensors``, ``a dict``."""
    import torch

    if isinstance(result, torch.Tensor):
        return f"a Tensor of shape {tuple(result.shape)}"
    if isinstance(result, (list, tuple)):
        kinds = [type(item).__name__ for item in result]  # in order: (Tensor, NoneType) is an (out, handle)
        what = "Tensors" if set(kinds) == {"Tensor"} else "items (" + ", ".join(kinds) + ")"
        if set(kinds) == {"Tensor"}:
            shapes = ", ".join(str(tuple(item.shape)) for item in result)
            return f"a {type(result).__name__} of {len(result)} Tensor(s) of shapes {shapes}"
        return f"a {type(result).__name__} of {len(result)} {what}"
    return f"a {type(result).__name__}"


def fits(result: Any, output: str, world: int) -> bool:
    """Whether ``result`` has the structure of ``output`` for ``world`` ranks (shapes aside)."""
    import torch

    if OUTPUTS[output].one_tensor:
        return isinstance(result, torch.Tensor)
    if OUTPUTS[output].per_rank:
        return isinstance(result, (list, tuple)) and len(result) == world and all(isinstance(t, torch.Tensor) for t in result)
    return isinstance(result, (list, tuple)) and len(result) >= 1 and isinstance(result[0], torch.Tensor)


def detect_output(result: Any, x: torch.Tensor, world: int, dim: int) -> str:
    """The convention ``result`` fits, for input ``x`` gathered along ``dim``, else :class:`Misfit`.
    A tensor of any shape but the stack's reads as ``tensor``: a wrong shape is a finding."""
    import torch

    concatenated = list(x.shape)
    concatenated[dim] *= world
    if isinstance(result, torch.Tensor):
        stacked = (world, *x.shape)
        return "stack" if tuple(result.shape) == stacked and stacked != tuple(concatenated) else "tensor"
    if fits(result, "first", world) and list(result[0].shape) == concatenated and world > 1:
        return "first"
    if fits(result, "list", world) and all(tuple(t.shape) == tuple(x.shape) for t in result):
        return "list"
    if fits(result, "first", world):
        return "first"
    if fits(result, "list", world):
        return "list"
    if result is None:
        raise Misfit("returned None (or a work handle alone): a collective that leaves its result in its input, as dist.all_reduce(x) does, is "
                     "checked with --collective all-reduce (collective=\"all-reduce\" from Python); a gather must "
                     "return its result")
    raise Misfit(f"returned {describe_result(result)}; no convention reads it (tensor: the concatenation; list: "
                 f"one tensor per rank; stack: a ({world}, ...) tensor; first: a tuple starting with the "
                 f"concatenation)")


def check_fits(result: Any, output: str, x: torch.Tensor, world: int, dim: int, *, what: str = "") -> None:
    """Raise :class:`Misfit` when ``result`` does not have the declared ``output`` structure
    (``what``: the only structure a collective's result can have, said instead of a hint)."""
    if fits(result, output, world):
        return
    if what:
        raise Misfit(f"returned {describe_result(result)}, but should return {what}")
    try:
        better = detect_output(result, x, world, dim)
    except Misfit:
        better = ""
    hint = f"; --output {better} would fit" if better else "; no convention reads it"
    raise Misfit(f"returned {describe_result(result)}, which --output {output} does not read{hint}")


@dataclass
class Reading:
    """A result taken apart: ``pieces`` (one tensor, or W for ``list``) are compared with the
    reference, ``flowing`` (the concatenation, or the stack) is what backward runs from."""

    pieces: list[torch.Tensor]
    flowing: torch.Tensor


def read(result: Any, output: str, world: int, dim: int) -> Reading:
    """Take ``result`` apart by its convention; :class:`Misfit` if it lacks the structure."""
    import torch

    if not fits(result, output, world):
        raise Misfit(f"returned {describe_result(result)}, but --output {output} expects "
                     + OUTPUTS[output].expects.format(world=world))
    if OUTPUTS[output].per_rank:
        pieces = list(result)
        return Reading(pieces, torch.cat(pieces, dim=dim) if pieces[0].ndim else torch.stack(pieces))
    tensor = result if OUTPUTS[output].one_tensor else result[0]
    return Reading([tensor], tensor)
