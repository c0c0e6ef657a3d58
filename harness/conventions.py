"""Calling conventions: how a gather is called, and how its result reads (BRIEF §2).

Published gathers are written many ways.  This module turns any of them into the one call
the harness makes, without glue from the user:

- **how it is called** (:class:`Call`, planned from the signature by :func:`plan_call`):
  ``f(x)``, ``f(x, dim)``, ``f(x, dim=...)`` (or ``gather_dim=``/``axis=``), with ``group=``
  when the signature takes it; an ``autograd.Function`` subclass through ``.apply`` with
  the same arguments positionally; an ``nn.Module`` instance through its ``forward``;
- **how its result reads** (``output``): ``tensor`` (the concatenation along ``dim``),
  ``list`` (a list or tuple of W per-rank tensors), ``stack`` (a ``(W, *shape)`` tensor,
  equal shapes only) or ``first`` (a tuple whose first element is the concatenation).
  :func:`detect_output` names the convention a probe result fits, :func:`read` takes a
  result apart for the checks and builds the tensor gradients flow through.

A target that fits no convention raises :class:`Misfit` with one line saying what came
back and what would fit; the harness turns that into exit status 2, never a finding.

This module is embedded in repro scripts: it imports only torch and the standard library.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from typing import Any

import torch

OUTPUTS: tuple[str, ...] = ("tensor", "list", "stack", "first")
#: Parameter names read as the gather dim, and as the process group.
DIM_NAMES: tuple[str, ...] = ("dim", "gather_dim", "axis")
GROUP_NAMES: tuple[str, ...] = ("group", "process_group", "pg")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Misfit(TypeError):
    """The target cannot be called, or its result read, by any supported convention."""


@dataclass(frozen=True)
class Call:
    """How to call a target: plain data, so it travels to ranks and into repro scripts.

    - ``apply``: the target is an ``autograd.Function`` subclass, called as ``.apply(...)``
      (positional arguments only); ``module``: an ``nn.Module`` instance.
    - ``dim``: ``"positional"``, the name of the keyword to pass it by, or ``""`` (``f(x)``,
      which gathers along dim 0 only).
    - ``group``: ``"positional"``, the keyword name, or ``""`` (never passed).
    - ``group_required``: the signature has no default for the group, so one is always passed.
    - ``signature``: the signature as written, for messages.
    """

    dim: str = "positional"
    group: str = ""
    group_required: bool = False
    apply: bool = False
    module: bool = False
    signature: str = "(x, dim)"

    @property
    def takes_dim(self) -> bool:
        return bool(self.dim)

    def describe(self) -> str:
        """E.g. ``Gather.apply(x, dim, group)`` or ``f(x, dim=..., group=...)``."""
        args = ["x"]
        if self.dim:
            args.append("dim" if self.dim == "positional" else f"{self.dim}=")
        if self.group:
            args.append("group" if self.group == "positional" else f"{self.group}=")
        return ("Function.apply" if self.apply else "f") + "(" + ", ".join(args) + ")"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def invoke(self, target: Any, x: torch.Tensor, dim: int, group: Any = None, *, pass_group: bool = False) -> Any:
        """Call ``target`` on ``x`` this way; ``group`` is passed when asked or required."""
        args: list[Any] = [x]
        kwargs: dict[str, Any] = {}
        if self.dim == "positional":
            args.append(dim)
        elif self.dim:
            kwargs[self.dim] = dim
        if self.group and (pass_group or self.group_required):
            if self.group == "positional":
                args.append(group)
            else:
                kwargs[self.group] = group
        function = target.apply if self.apply else target
        return function(*args, **kwargs)


def plan_call(target: Any, *, needs_group: bool = False) -> Call:
    """The :class:`Call` for ``target``, read from its signature; :class:`Misfit` if none fits.

    ``needs_group``: the harness will pass a process group (``--groups``), so the target
    must take one.
    """
    if inspect.isclass(target):
        if not issubclass(target, torch.autograd.Function):
            raise Misfit(f"{target.__name__} is a class, not an autograd.Function: the harness cannot construct "
                         f"it; pass a function that calls it (or an instance, if it is an nn.Module)")
        signature = _forward_signature(target)
        return _plan(signature, needs_group, apply=True, module=False, name=f"{target.__name__}.apply")
    if not callable(target):
        raise Misfit(f"{target!r} is of type {type(target).__name__}, not a callable gather")
    module = isinstance(target, torch.nn.Module)
    try:
        signature = inspect.signature(target.forward if module else target)
    except (TypeError, ValueError):
        return Call(signature="(unknown signature: called as f(x, dim))")
    return _plan(signature, needs_group, apply=False, module=module, name=getattr(target, "__name__", "target"))


def _forward_signature(function_class: type) -> inspect.Signature:
    """``forward``'s signature without ``ctx`` (absent when the class defines ``setup_context``)."""
    signature = inspect.signature(function_class.forward)  # type: ignore[attr-defined]
    parameters = list(signature.parameters.values())
    own_setup = function_class.setup_context is not torch.autograd.Function.setup_context  # type: ignore[attr-defined]
    if not own_setup and parameters:
        parameters = parameters[1:]  # ctx
    return signature.replace(parameters=parameters)


def _plan(signature: inspect.Signature, needs_group: bool, *, apply: bool, module: bool, name: str) -> Call:
    parameters = list(signature.parameters.values())
    written = f"{name}{signature}"
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in parameters[:1]):
        return Call(apply=apply, module=module, signature=written)  # f(*args): the historical f(x, dim)
    positional = [p for p in parameters if p.kind in _POSITIONAL]
    if not positional:
        raise Misfit(f"{written} takes no positional argument for the tensor x: call it as f(x) or f(x, dim)")
    rest = parameters[parameters.index(positional[0]) + 1:]
    dim = _dim_parameter(rest, apply)
    group = _group_parameter(rest, apply)
    unmet = [p.name for p in rest if p.default is inspect.Parameter.empty
             and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
             and p is not dim and p is not group]
    if unmet:
        raise Misfit(f"{written} needs {', '.join(repr(n) for n in unmet)}, which the harness cannot supply: it calls "
                     f"f(x), f(x, dim) or passes dim=/group=; wrap it, e.g. def gather(x, dim): return ...")
    if apply and group is not None and dim is None and rest.index(group) != 0:
        raise Misfit(f"{written}: .apply takes arguments by position, and the group is not right after x")
    if needs_group and group is None:
        raise Misfit(f"{written} takes no group argument, but --groups passes group=: add a 'group' parameter "
                     f"(default None) or leave out --groups")
    return Call(
        dim="" if dim is None else ("positional" if apply or (dim is rest[0] and dim.kind in _POSITIONAL)
                                    else dim.name),
        group="" if group is None else ("positional" if apply or group.kind == inspect.Parameter.POSITIONAL_ONLY
                                        else group.name),
        group_required=group is not None and group.default is inspect.Parameter.empty,
        apply=apply, module=module, signature=written,
    )


def _dim_parameter(rest: list[inspect.Parameter], apply: bool) -> inspect.Parameter | None:
    """The parameter that takes the gather dim: one named like a dim, else a required second
    positional one (``f(x, d)``); a second parameter with a default is something else (sizes, ...)."""
    named = [p for p in rest if p.name in DIM_NAMES and p.kind != inspect.Parameter.VAR_KEYWORD]
    if named:
        if apply and rest.index(named[0]) != 0:
            return None  # .apply cannot skip the parameters before it
        return named[0]
    if rest and rest[0].kind in _POSITIONAL and rest[0].name not in GROUP_NAMES and rest[0].default is inspect.Parameter.empty:
        return rest[0]
    return None


def _group_parameter(rest: list[inspect.Parameter], apply: bool) -> inspect.Parameter | None:
    named = [p for p in rest if p.name in GROUP_NAMES and p.kind != inspect.Parameter.VAR_KEYWORD]
    return named[0] if named else None


# -- reading results ------------------------------------------------------------------------------


def describe_result(result: Any) -> str:
    """What came back, in a few words: ``a Tensor of shape (4,)``, ``a tuple of 2 Tensors``, ``a dict``."""
    if isinstance(result, torch.Tensor):
        return f"a Tensor of shape {tuple(result.shape)}"
    if isinstance(result, (list, tuple)):
        kinds = {type(item).__name__ for item in result}
        what = "Tensors" if kinds == {"Tensor"} else "items (" + ", ".join(sorted(kinds)) + ")"
        if kinds == {"Tensor"}:
            shapes = ", ".join(str(tuple(item.shape)) for item in result)
            return f"a {type(result).__name__} of {len(result)} Tensor(s) of shapes {shapes}"
        return f"a {type(result).__name__} of {len(result)} {what}"
    return f"a {type(result).__name__}"


def fits(result: Any, output: str, world: int) -> bool:
    """Whether ``result`` has the structure of ``output`` for ``world`` ranks (shapes aside)."""
    if output in ("tensor", "stack"):
        return isinstance(result, torch.Tensor)
    if output == "list":
        return isinstance(result, (list, tuple)) and len(result) == world and all(isinstance(t, torch.Tensor) for t in result)
    return isinstance(result, (list, tuple)) and len(result) >= 1 and isinstance(result[0], torch.Tensor)


def detect_output(result: Any, x: torch.Tensor, world: int, dim: int) -> str:
    """The convention ``result`` fits, for input ``x`` (equal on every rank) gathered along ``dim``.

    Raises :class:`Misfit` when none does.  A tensor shaped ``(W, *x.shape)`` that is not
    also the concatenation's shape reads as ``stack``; any other tensor as ``tensor`` (a
    wrong shape is then a finding, not a misfit).
    """
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
    raise Misfit(f"returned {describe_result(result)}; no convention reads it (tensor: the concatenation; list: "
                 f"one tensor per rank; stack: a ({world}, ...) tensor; first: a tuple starting with the "
                 f"concatenation)")


def check_fits(result: Any, output: str, x: torch.Tensor, world: int, dim: int) -> None:
    """Raise :class:`Misfit` when ``result`` does not have the declared ``output`` structure."""
    if fits(result, output, world):
        return
    try:
        better = detect_output(result, x, world, dim)
    except Misfit:
        better = ""
    hint = f"; --output {better} would fit" if better else "; no convention reads it"
    raise Misfit(f"returned {describe_result(result)}, which --output {output} does not read{hint}")


@dataclass
class Reading:
    """A result taken apart: ``pieces`` are compared with the reference, ``flowing`` carries gradients.

    ``pieces`` is one tensor (``tensor``, ``stack``, ``first``: the result or its first
    element) or W tensors (``list``); ``flowing`` is the tensor the rank calls backward on:
    the concatenation along ``dim`` (``list``: of the pieces), or the stacked result.
    """

    pieces: list[torch.Tensor]
    flowing: torch.Tensor


def read(result: Any, output: str, world: int, dim: int) -> Reading:
    """Take ``result`` apart by its convention; :class:`Misfit` if it lacks the structure."""
    if not fits(result, output, world):
        raise Misfit(f"returned {describe_result(result)}, but --output {output} expects "
                     + {"tensor": "a Tensor", "stack": "a Tensor", "list": f"a list or tuple of {world} Tensors",
                        "first": "a tuple whose first element is a Tensor"}[output])
    if output == "list":
        pieces = list(result)
        return Reading(pieces, torch.cat(pieces, dim=dim) if pieces[0].ndim else torch.stack(pieces))
    tensor = result[0] if output == "first" else result
    return Reading([tensor], tensor)
