"""Binding by name: the :class:`~harness.core.conventions.Call` for a target, planned from its signature.

x goes to the first parameter; every other argument is **bound by name, never by position or
guess** (:data:`~harness.core.conventions.ROLE_NAMES`): the dim, the process group, the rank in
it, its size; ``--kwarg NAME=LITERAL`` fixes others.  Parameters before x named like a group, a
rank, a world size or an output list are passed first; an ``autograd.Function`` is called through
``.apply``, an ``nn.Module`` through ``forward``.  A required parameter the harness cannot supply,
or a second dim left to its default, is a :class:`Misfit` naming the option that would supply it.

Embedded in repro scripts: it imports only torch, the standard library and core modules, relatively.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from .conventions import COLLECTIVE_OF_ROLE, FIXED, GATHER_DIM_NAMES, ROLE_NAMES, ROOT_IN_GROUP, Call
from .errors import Misfit

#: Names of a first parameter that takes x as a list of pieces (a neighbour's ``input_list``).
LIST_NAMES: tuple[str, ...] = ("input_list", "tensor_list", "input_tensor_list", "input_tensors", "tensors",
                               "chunks", "pieces")
#: An annotation that says "a list": ``list[Tensor]``, ``List[Tensor]``, ``Sequence[Tensor]``, ``tuple[...]``.
_LIST_ANNOTATION = re.compile(r"^(?:typing\.|collections\.abc\.)?(?:list|List|tuple|Tuple|Sequence|MutableSequence)\b")
#: The roles every collective binds; the others are bound only for the collectives that have
#: them (``Collective.roles``): a gather's ``splits`` parameter is its own business.
BASE_ROLES: tuple[str, ...] = ("dim", "group", "rank", "world_size")
#: Dim names only a neighbour of the gather reads as its dim (a gather's ``scatter_dim`` is not its dim);
#: ``scatter_idx``/``gather_idx`` are DeepSpeed-Ulysses' and yunchang's names.
_NEIGHBOUR_DIM_NAMES = ("scatter_dim", "split_dim", "scatter_idx", "gather_idx")
#: A parameter named like a dim (``seq_dim``, ``head_axis``, a neighbour's dim names): one the
#: collective does not bind would be left at a default the harness does not understand, and the
#: call would differ from the one checked, so it is bound, fixed with ``--kwarg``, or refused.
_DIM_LIKE = re.compile(r"^(?:\w+_)?(?:dim|axis)$|^(?:scatter|gather|split)_idx$|^dimension$")
#: A default's ``<module.Class object at 0x...>`` repr, shown as ``<module.Class>`` in messages.
_OBJECT_REPR = re.compile(r"<([\w.]+) object at 0x[0-9a-f]+>")
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def plan_call(target: Any, *, needs_group: bool = False, kwargs: tuple[tuple[str, str], ...] = (),
              name: str = "", roles: tuple[str, ...] = ()) -> Call:
    """The :class:`Call` for ``target``, read from its signature; :class:`Misfit` if none fits.

    ``needs_group``: ``--groups`` will pass a group.  ``name``: a target without a ``__name__``'s
    name in messages.  ``roles``: the roles the collective binds besides :data:`BASE_ROLES`
    (``Collective.roles``); the first splits x for a target taking a list.
    """
    names, list_role = _role_names(roles), _list_role(roles)
    if inspect.isclass(target):
        if not issubclass(target, torch.autograd.Function):
            raise Misfit(f"{target.__name__} is a class, not an autograd.Function: the harness cannot construct "
                         f"it; pass a function that calls it (or an instance, if it is an nn.Module)")
        signature = _forward_signature(target)
        return _Planner(f"{target.__name__}.apply", signature, kwargs, names, apply=True,
                        list_role=list_role).plan(needs_group)
    if not callable(target):
        raise Misfit(f"{target!r} is of type {type(target).__name__}, not a callable "
                     + ("collective" if roles else "gather"))
    module = isinstance(target, torch.nn.Module)
    name = getattr(target, "__name__", None) or name or type(target).__name__
    try:
        signature = inspect.signature(target.forward if module else target)
    except (TypeError, ValueError):
        return _unnamed(name, f"{name}(<signature unknown>)", kwargs, needs_group, module=module)
    function = inspect.isfunction(target) and "." not in target.__qualname__  # funcol's (self: Tensor, ...)
    return _Planner(name, signature, kwargs, names, module=module, list_role=list_role,
                    function=function).plan(needs_group)


def plan_signature(name: str, signature: inspect.Signature, *, needs_group: bool = False,
                   kwargs: tuple[tuple[str, str], ...] = (), roles: tuple[str, ...] = ()) -> Call:
    """:func:`plan_call`'s :class:`Call` for a plain function ``name`` of ``signature``, known
    without the function itself (read off its source before any rank starts)."""
    return _Planner(name, signature, kwargs, _role_names(roles), list_role=_list_role(roles),
                    function=True).plan(needs_group)


def _list_role(roles: tuple[str, ...]) -> str:
    """The role a target taking a list of pieces gets them for: the collective's first, if it splits x."""
    return roles[0] if roles and roles[0] in COLLECTIVE_OF_ROLE else ""


def _role_names(roles: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The names that take each role for a collective binding ``roles`` besides the base ones."""
    names = {role: ROLE_NAMES[role] for role in BASE_ROLES + roles}
    if roles:
        names["dim"] += _NEIGHBOUR_DIM_NAMES
    return names


def _names_a_reduction(parameter: inspect.Parameter) -> bool:
    """Whether a reduction's parameter takes its name as a string (funcol's ``reduceOp: str``), not a ``ReduceOp``."""
    return isinstance(parameter.default, str) or parameter.annotation in (str, "str")


def _takes_list(parameter: inspect.Parameter) -> bool:
    """Whether x's parameter says it takes a list of pieces: by its annotation or its name."""
    annotation = parameter.annotation
    if isinstance(annotation, type):
        written = annotation.__name__
    else:
        written = "" if annotation is inspect.Parameter.empty else str(annotation)
    return bool(_LIST_ANNOTATION.match(written)) or parameter.name in LIST_NAMES


def _forward_signature(function_class: type) -> inspect.Signature:
    """``forward``'s signature without ``ctx`` (absent when the class defines ``setup_context``)."""
    signature = inspect.signature(function_class.forward)  # type: ignore[attr-defined]
    parameters = list(signature.parameters.values())
    own_setup = function_class.setup_context is not torch.autograd.Function.setup_context  # type: ignore[attr-defined]
    if not own_setup and parameters:
        parameters = parameters[1:]  # ctx
    return signature.replace(parameters=parameters)


def _unnamed(name: str, written: str, kwargs: tuple[tuple[str, str], ...], needs_group: bool, *,
             module: bool = False, apply: bool = False) -> Call:
    """A signature that names no parameter (``f(*args, **kwargs)``, a builtin): ``f(x, dim)``, the
    dim inferred; fixed arguments by keyword."""
    if needs_group:
        raise Misfit(f"{written} names no group parameter, but --groups passes one by name: give the target a "
                     f"'group' parameter (default None) or leave out --groups")
    return Call(name=name, positional=(("", "dim"),), keywords=tuple((key, FIXED) for key, _ in kwargs),
                kwargs=kwargs, inferred=("dim",), apply=apply, module=module, signature=written)


class _Planner:
    """Binds a signature's parameters by name (see the module docstring) and arranges the call."""

    def __init__(self, name: str, signature: inspect.Signature, kwargs: tuple[tuple[str, str], ...],
                 names: dict[str, tuple[str, ...]], *, apply: bool = False, module: bool = False,
                 list_role: str = "", function: bool = False) -> None:
        self.name, self.signature, self.kwargs, self.names = name, signature, kwargs, names
        self.function = function
        self.list_role = list_role
        self.apply, self.module = apply, module
        self.written = _OBJECT_REPR.sub(r"<\1>", f"{name}{signature}")

    def plan(self, needs_group: bool) -> Call:
        parameters = list(self.signature.parameters.values())
        if parameters and parameters[0].kind == inspect.Parameter.VAR_POSITIONAL:
            return self._unnamed(needs_group)
        first = next((p for p in parameters if p.kind in _POSITIONAL), None)
        if first is None:
            raise Misfit(f"{self.written} takes no positional parameter for the tensor x: the harness passes x "
                         f"first, as in f(x) or f(x, dim)")
        if first.name in ("self", "cls") and not (self.apply or self.module or self.function):
            raise Misfit(f"{self.written} is a method (its first parameter is {first.name!r}), named through its "
                         f"class: the harness has no instance to call it on; name an instance made at module level "
                         f"(module:instance.{self.name}), or wrap it, e.g. def {self._wrapper()}(x, dim): return "
                         f"MyClass(...).{self.name}(x, dim)")
        leading = self._leading(parameters)  # f(group, x, ...), f(rank, world_size, outputs, inputs)
        if leading:
            first = parameters[len(leading)]
        pieces = self._pieces_at_source(parameters, first)
        if pieces is not None:  # dist.scatter(tensor, scatter_list, src): the output slot first, x's pieces next
            leading, first = [*leading, (first.name, "output_slot")], pieces
        if first.name in _OUTPUT_NAMES:
            raise Misfit(f"{self.written}: x would go to {first.name!r}, which names an output the caller allocates; "
                         f"the harness fills only an all-to-all's output list ({', '.join(ROLE_NAMES['output_list'])}) "
                         f"given before its input, so check it through a wrapper that allocates the output, passes "
                         f"it and returns it, e.g. def {self._wrapper()}(x, dim): out = ...; {self.name}(out, x, ...); "
                         f"return out")
        rest = [p for p in parameters[parameters.index(first) + 1:] if p.kind not in _VARIADIC]
        roles = self._bind(first, rest, any(p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters))
        split_input = self.list_role if self.list_role and (_takes_list(first) or pieces is not None) else ""
        self._check_dims(first, rest, roles)
        if "scatter_dim" in roles.values() and "output_list" in [*roles.values(), *(role for _, role in leading)]:
            raise Misfit(f"{self.written} takes a re-layout's two dims and an output list to fill: the harness "
                         f"allocates an output list for a one-dim all-to-all only; check it through a wrapper that "
                         f"allocates the pieces and returns them")
        unmet = [p for p in rest if p.default is inspect.Parameter.empty and p.name not in roles]
        if unmet:
            raise Misfit(self._unmet(first, unmet))
        if needs_group and "group" not in [*roles.values(), *(role for _, role in leading)]:
            raise Misfit(f"{self.written} takes no group parameter (named {', '.join(ROLE_NAMES['group'])}), but "
                         f"--groups passes one: add a 'group' parameter (default None) or leave out --groups")
        bound = [p for p in rest if p.name in roles]
        extra = [(key, FIXED) for key, _ in self.kwargs if key not in {p.name for p in rest}]  # into **kwargs
        positional, keywords = self._arrange(rest, bound, roles)
        group = next((p for p in bound if roles[p.name] == "group"), None)
        optional = (group is not None and group.default is not inspect.Parameter.empty
                    and (positional[-1:] == [(group.name, "group")] or (group.name, "group") in keywords))
        return Call(name=self.name, positional=tuple(positional), keywords=tuple(keywords + extra),
                    kwargs=self.kwargs, group_optional=optional, apply=self.apply, module=self.module,
                    signature=self.written, split_input=split_input, leading=tuple(leading),
                    x_at_source=pieces is not None)

    def _pieces_at_source(self, parameters: list[inspect.Parameter],
                          first: inspect.Parameter) -> inspect.Parameter | None:
        """The parameter right after ``first`` named like a scatter's list of pieces at the source
        (``dist.scatter(tensor, scatter_list, src)``: ``first`` is then the output to fill), if any."""
        after = parameters[parameters.index(first) + 1:parameters.index(first) + 2]
        taken_by = self.names.get("scatter_list", ())
        return after[0] if after and after[0].name in taken_by and after[0].kind in _POSITIONAL else None

    def _unnamed(self, needs_group: bool) -> Call:
        accepts = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in self.signature.parameters.values())
        if self.kwargs and (self.apply or not accepts):
            key = self.kwargs[0][0]
            raise Misfit(f"--kwarg {key}: {self.written} takes no parameter {key!r} by name")
        return _unnamed(self.name, self.written, self.kwargs, needs_group, module=self.module, apply=self.apply)

    def _bind(self, first: inspect.Parameter, rest: list[inspect.Parameter], var_keyword: bool) -> dict[str, str]:
        """Parameter name -> role: a re-layout's two dims, the first parameter named like each other
        role, then the fixed ones."""
        roles = self._relayout(rest)
        for role, taken_by in self.names.items():
            if role == "scatter_dim" or role in roles.values():
                continue
            taker = next((p for p in rest if p.name in taken_by and p.name not in roles), None)
            if taker is not None:
                roles[taker.name] = role
        for parameter in rest:
            if roles.get(parameter.name) == "op" and _names_a_reduction(parameter):
                roles[parameter.name] = "op_name"
            role = roles.get(parameter.name, "")
            if role in ROOT_IN_GROUP and parameter.name.startswith("group_"):  # c10d's group_src, group_dst
                roles[parameter.name] = ROOT_IN_GROUP[role]
        names = {p.name for p in rest}
        for key, _ in self.kwargs:
            if key == first.name:
                raise Misfit(f"--kwarg {key}: {key!r} is the parameter x goes to in {self.written}")
            if key in roles:
                raise Misfit(f"--kwarg {key}: the harness passes {key!r} itself in {self.written} "
                             f"({self._source(roles[key])}); leave out --kwarg {key}")
            if key not in names and not (var_keyword and not self.apply):
                raise Misfit(f"--kwarg {key}: {self.written} takes no parameter {key!r}"
                             + (" (.apply passes arguments by position only)" if var_keyword else ""))
            if key in names:
                roles[key] = FIXED
        return roles

    def _source(self, role: str) -> str:
        """Where the value of ``role`` comes from, in words that fit the collective checked."""
        if role == "dim" and self._kind() == "gather":
            return "the gather dim of each case; --dims N checks dim N only"
        return _ROLE_SOURCE[role]

    def _relayout(self, rest: list[inspect.Parameter]) -> dict[str, str]:
        """An all-to-all's parameters named like a scatter dim and a gather dim: a re-layout, both
        bound (the gather dim as ``dim``); otherwise nothing, and either alone is the dim."""
        if "scatter_dim" not in self.names:
            return {}
        scatter = next((p for p in rest if p.name in self.names["scatter_dim"]), None)
        gather = next((p for p in rest if p.name in GATHER_DIM_NAMES), None)
        if scatter is None or gather is None:
            return {}
        return {scatter.name: "scatter_dim", gather.name: "dim"}

    def _leading(self, parameters: list[inspect.Parameter]) -> list[tuple[str, str]]:
        """``(parameter, role)`` of the positional parameters at the front named like a leading role,
        as long as a positional parameter for x follows (``f(group)`` alone: no guess)."""
        takers = {name: role for role, taken_by in self.names.items() if role in _LEADING_ROLES for name in taken_by}
        leading: list[tuple[str, str]] = []
        for parameter in parameters:
            if parameter.kind not in _POSITIONAL or parameter.name not in takers:
                break
            leading.append((parameter.name, takers[parameter.name]))
        following = parameters[len(leading):len(leading) + 1]
        return leading if following and following[0].kind in _POSITIONAL else []

    def _wrapper(self) -> str:
        """A wrapper's name in messages: the kind of target, unless that is the target's own name
        (``def gather(x, dim): return gather(x, ...)`` would call itself)."""
        kind = self._kind()
        return f"checked_{kind}" if self.name.rpartition(".")[2] == kind else kind

    def _kind(self) -> str:
        """What the target is, for a wrapper's name in messages: ``gather`` or ``collective``."""
        return "collective" if "scatter_dim" in self.names["dim"] else "gather"

    def _check_dims(self, first: inspect.Parameter, rest: list[inspect.Parameter], roles: dict[str, str]) -> None:
        """A second parameter named like a dim that is not bound is :class:`Misfit`, unless ``--kwarg``
        fixes it: at its default, or given the same dim, it makes a call its callers never make, and
        a finding must never come from an argument the harness does not understand."""
        unbound = [p for p in rest if p.name not in roles and _DIM_LIKE.match(p.name)]
        if not unbound:
            return
        parameter = unbound[0]
        bound = next((name for name, role in roles.items() if role == "dim"), "")
        default = ("" if parameter.default is inspect.Parameter.empty
                   else f", left at its default {parameter.default!r},")
        if bound and parameter.name in self.names["dim"]:  # two dims the harness knows: a re-layout
            raise Misfit(f"{self.written} takes two dims, {bound!r} and {parameter.name!r}: a re-layout (scatter one "
                         f"dim, gather the pieces along another), and the one-dim {self._kind()} checked here has one, "
                         f"so {parameter.name!r} cannot be supplied: left at its default or given the same dim as "
                         f"{bound!r}, it would make a call its callers never make, and a mismatch would be no finding; "
                         f"a re-layout is an all-to-all: check it with --collective all-to-all, which binds both")
        binds = f"binds the case's dim to {bound!r}" if bound else "binds none of its parameters to the case's dim"
        other = "" if self._kind() != "gather" else (
            f"; if {self.name} is an all-to-all or a reduce-scatter, say so with --collective (a neighbour binds "
            f"{', '.join(_NEIGHBOUR_DIM_NAMES)} too)")
        wrapper = f"def f({first.name}, dim): return {self.name}({first.name}, dim, {parameter.name}=dim)"
        raise Misfit(f"{self.written}: {parameter.name!r} names a dim the harness cannot supply (it {binds}): "
                     f"{parameter.name}{default} would make another call than the one checked, so it is not "
                     f"judged{other}; if one value is right for every case, give it with --kwarg "
                     f"{parameter.name}=LITERAL, or wrap the target, e.g. {wrapper}")

    def _arrange(self, rest: list[inspect.Parameter], bound: list[inspect.Parameter],
                 roles: dict[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """Which bound arguments go by position (``.apply``: all; positional-only ones; a dim right
        after x, as in ``gather(x, 0)``) and which by keyword."""
        if self.apply:
            by_position = bound
        else:
            lead = [p for p in bound if p.kind == inspect.Parameter.POSITIONAL_ONLY]
            dim_first = (bool(bound) and rest[0] is bound[0] and roles[bound[0].name] == "dim"
                         and bound[0].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD)
            by_position = lead or (bound[:1] if dim_first else [])
        if by_position:
            last = rest.index(by_position[-1])
            skipped = [p for p in rest[: last + 1] if p not in by_position]
            if skipped or any(p.kind == inspect.Parameter.KEYWORD_ONLY for p in by_position):
                raise Misfit(self._unreachable(skipped, by_position[-1]))
        keywords = [(p.name, roles[p.name]) for p in bound if p not in by_position]
        return [(p.name, roles[p.name]) for p in by_position], keywords

    def _unreachable(self, skipped: list[inspect.Parameter], last: inspect.Parameter) -> str:
        how = ".apply passes arguments by position only" if self.apply else "positional-only parameters"
        if not skipped:
            return f"{self.written}: {how}, and {last.name!r} is keyword-only: wrap the target"
        gap = skipped[0]
        return (f"{self.written}: {how}, so passing {last.name!r} means passing {gap.name!r} before it; give it "
                f"with --kwarg {gap.name}={gap.default!r} (its default) or wrap the target")

    def _unmet(self, first: inspect.Parameter, unmet: list[inspect.Parameter]) -> str:
        named = ", ".join(repr(p.name) for p in unmet)
        return (f"{self.written} needs {named}, which the harness cannot supply: it passes x as {first.name!r} and "
                f"binds by name only {_bound_by_name(self.names)}; " + "; ".join(self._hint(p) for p in unmet))

    def _hint(self, parameter: inspect.Parameter) -> str:
        collective = next((name for role, name in COLLECTIVE_OF_ROLE.items()
                           if parameter.name in ROLE_NAMES[role] and role not in self.names), "")
        if collective:
            return (f"{parameter.name!r} is how a {collective} is told its sizes: if {self.name} computes a "
                    f"{collective}, check it with --collective {collective} (collective={collective!r} from Python)")
        wrapper = f"def {self._wrapper()}(x, dim): return {self.name}(x, ...)"
        if parameter.name in _OUTPUT_NAMES:
            return (f"{parameter.name!r} looks like an output the caller allocates: the harness fills only an "
                    f"all-to-all's output list ({', '.join(ROLE_NAMES['output_list'])}), so check it through a "
                    f"wrapper that allocates it and returns it, e.g. {wrapper}")
        annotation = parameter.annotation
        shown = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
        if annotation is not inspect.Parameter.empty and "Tensor" in shown:
            return (f"{parameter.name!r} is annotated {shown}: no literal is a tensor, so check it through a wrapper "
                    f"that takes x alone, e.g. {wrapper}")
        return (f"if one fixed value is right for every call, give it with --kwarg {parameter.name}=LITERAL "
                f"(pytest --gather-kwarg, check_gather(kwargs=...)); an object, a tensor or a value that depends "
                f"on the call needs a wrapper, e.g. {wrapper}")


#: Names of an output the caller allocates that the harness does not fill (an all-to-all's list it does).
_OUTPUT_NAMES = ("output", "out", "output_tensor", "out_tensor", "output_tensor_list", "output_list",
                 "out_tensor_list", "output_tensors", "out_list")


#: The roles a parameter before x may take (``_Planner._leading``).
_LEADING_ROLES = ("group", "rank", "world_size", "output_list")


#: What each role is, for messages.
_ROLE_WHAT = {"dim": "a dim", "group": "a group", "rank": "the rank", "world_size": "the world size",
              "split_sizes": "the slot sizes", "input_split_sizes": "the sizes sent",
              "output_split_sizes": "the sizes received", "output_list": "an output list to fill",
              "scatter_dim": "a re-layout's scatter dim", "op": "the reduction", "op_name": "the reduction",
              "src": "the source", "src_group": "the source", "dst": "the destination",
              "dst_group": "the destination", "gather_list": "the destination's list to fill",
              "scatter_list": "the source's pieces of x", "output_slot": "the output slot to fill"}


def _bound_by_name(names: dict[str, tuple[str, ...]]) -> str:
    """What the harness binds for a collective, for messages: ``a dim (dim, ...), ... and the world size (...)``."""
    parts = [f"{_ROLE_WHAT[role]} ({', '.join(taken_by)})" for role, taken_by in names.items()]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


#: Where the value of a role comes from, for messages.
_ROLE_SOURCE = {
    "dim": "the dim of each case; --dims N checks dim N only, --gather-dim N a re-layout's gather dim N",
    "scatter_dim": "a re-layout's scatter dim of each case; --scatter-dim N checks dim N only",
    "group": "the world group, or each case's group with --groups",
    "rank": "this rank within the group passed",
    "world_size": "the size of the group passed",
    "split_sizes": "each member's slot length along dim, from each case",
    "input_split_sizes": "the rows this rank sends each member, from each case",
    "output_split_sizes": "the rows each member sends this rank, from each case",
    "output_list": "one empty tensor per member, of the rows it sends this rank, for the target to fill",
    "op": "--op, as a ReduceOp",
    "op_name": "--op, as funcol's string ('sum', 'avg', 'max', 'min', 'product', 'band', 'bor', 'bxor')",
    "src": "--src, the source's group rank, passed as its global rank (--src-rank group: as the group rank)",
    "src_group": "--src, the source's rank in the group passed",
    "dst": "--dst, the destination's group rank, passed as its global rank (--src-rank group: as the group rank)",
    "dst_group": "--dst, the destination's rank in the group passed",
    "gather_list": "one empty tensor like x per member at the destination (None on the others), for the target to fill",
    "scatter_list": "x split into the members' slots at the source (None on the others)",
    "output_slot": "an empty tensor of this member's slot, for the target to fill",
}
