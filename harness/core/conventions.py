"""Calling conventions: how a target is called, as plain data, and the roles its arguments take.

Published gathers are written many ways; the harness makes the call their authors' callers make,
without glue from the user.  A :class:`Call` is planned once from the target's signature, every
argument bound by name (:func:`harness.core.binding.plan_call`), and travels to the ranks and into
repro scripts, where :meth:`Call.invoke` makes it.  An argument passed to a parameter that does
not name it (``f(*args)`` called ``f(x, dim)``) is inferred (:attr:`Call.inferred`): a probe
failure with it is the harness's guess gone wrong, exit 2, never a finding.  How the result reads
is :mod:`harness.core.outputs`.

Embedded in repro scripts: it imports only torch and the standard library.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
import torch.distributed as dist

from .outputs import settle

#: The arguments the harness binds by a parameter's name: role -> the names that take it.
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "dim": ("dim", "gather_dim", "axis", "cat_dim", "concat_dim", "dimension"),
    "group": ("group", "process_group", "pg"),
    "rank": ("rank", "group_rank"),
    "world_size": ("world_size", "world", "num_replicas", "group_size"),
    "split_sizes": ("split_sizes", "splits", "scatter_sizes", "slot_sizes"),
    "input_split_sizes": ("input_split_sizes", "input_splits", "in_splits", "send_splits", "send_counts"),
    "output_split_sizes": ("output_split_sizes", "output_splits", "out_splits", "recv_splits", "recv_counts"),
    "output_list": ("output_tensor_list", "output_list", "out_tensor_list", "output_tensors", "out_list"),
    "scatter_dim": ("scatter_dim", "scatter_idx", "split_dim"),
    "op": ("op", "reduceOp", "reduce_op", "reduction"),
    "src": ("src", "root", "src_rank", "source", "group_src"),
    "dst": ("dst", "root", "dst_rank", "destination", "group_dst"),
    "gather_list": ("gather_list",),
    "scatter_list": ("scatter_list",),
}
#: The roles of a rooted collective's root passed as a global rank (c10d's convention), and the role
#: each takes passed as the rank in the group (``--src-rank group``, or a ``group_src``/``group_dst`` parameter).
ROOT_IN_GROUP: dict[str, str] = {"src": "src_group", "dst": "dst_group"}
#: A reduction's name in torch's two spellings: ``ReduceOp``'s member (role ``op``) and the string
#: the functional collectives take (role ``op_name``, a parameter annotated or defaulting to ``str``).
REDUCE_OPS: dict[str, tuple[str, str]] = {"sum": ("SUM", "sum"), "mean": ("AVG", "avg"), "max": ("MAX", "max"),
                                          "min": ("MIN", "min"), "product": ("PRODUCT", "product"),
                                          "band": ("BAND", "band"), "bor": ("BOR", "bor"), "bxor": ("BXOR", "bxor")}
#: A re-layout's gather dim: beside a parameter named like a scatter dim (``ROLE_NAMES["scatter_dim"]``),
#: the parameter named like this takes the case's dim (the one the pieces are concatenated along).
GATHER_DIM_NAMES = ("gather_dim", "gather_idx", "cat_dim", "concat_dim")
#: The role of a parameter given a fixed value (``--kwarg NAME=LITERAL``).
FIXED = "fixed"
#: The collective whose split sizes a role holds: a parameter of that name says which collective a target computes.
COLLECTIVE_OF_ROLE = {"split_sizes": "reduce-scatter", "input_split_sizes": "all-to-all",
                      "output_split_sizes": "all-to-all"}
#: The roles that tell a target the sizes of a ragged collective.
SPLIT_ROLES = frozenset(COLLECTIVE_OF_ROLE)


@dataclass(frozen=True)
class Call:
    """How to call a target: plain data (JSON-able), so it travels to ranks and into repro scripts.

    - ``positional``/``keywords``: ``(parameter, role)`` of each argument after x passed by
      position, in order, or by name; ``fixed`` roles take their literal from ``kwargs``.
    - ``group_optional``: the group has a default: a case without a layout passes it only when
      it says so (``Case.world_group``).
    - ``split_input``: the split-size role x is split by into the list passed first (``""``: x).
    - ``leading``: ``(parameter, role)`` passed by position *before* x, as in
      ``SeqAllToAll4D.apply(group, input, scatter_idx, gather_idx)``.
    """

    name: str = "f"
    positional: tuple[tuple[str, str], ...] = (("dim", "dim"),)
    keywords: tuple[tuple[str, str], ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()
    group_optional: bool = False
    inferred: tuple[str, ...] = ()
    apply: bool = False
    module: bool = False
    signature: str = "f(x, dim)"
    split_input: str = ""
    leading: tuple[tuple[str, str], ...] = ()
    compiled: bool = False
    #: It returns a work handle with its result (``async_op=True``), which its caller waits on: the
    #: probe saw one, and the minimal repro waits on it as the ranks do (:func:`~harness.core.outputs.settle`).
    waits: bool = False
    #: x goes in at the source alone, ``None`` on the other members: ``dist.scatter``'s ``scatter_list``.
    x_at_source: bool = False

    def __post_init__(self) -> None:  # from JSON, pairs arrive as lists
        for name in ("positional", "keywords", "kwargs", "leading"):
            object.__setattr__(self, name, tuple((str(a), str(b)) for a, b in getattr(self, name)))
        object.__setattr__(self, "inferred", tuple(self.inferred))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Call:
        """The call of :meth:`to_dict` (keys it does not know, such as a finding's ``made``, ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(role for _, role in self.leading + self.positional + self.keywords)

    @property
    def takes_dim(self) -> bool:
        return "dim" in self.roles

    @property
    def takes_scatter_dim(self) -> bool:
        """A re-layout's both dims are bound: the scatter dim here, the gather dim as ``dim``."""
        return "scatter_dim" in self.roles

    @property
    def takes_group(self) -> bool:
        return "group" in self.roles

    def forms(self, *, groups: bool) -> tuple[str, ...]:
        """Every call this makes: an optional group both ways unless ``--groups`` always passes one."""
        if self.group_optional and not groups:
            return self.describe(pass_group=True), self.describe(pass_group=False)
        return (self.describe(pass_group=True),)

    def describe(self, pass_group: bool = True) -> str:
        """The call as made, e.g. ``AllGatherGrad.apply(x, group)`` or ``gather(x, dim, rank=rank)``."""
        first = f"list(x.split({self.split_input}, dim))" if self.split_input else "x"
        first = f"{first} if rank == src else None" if self.x_at_source else first
        args, kwargs = self.arguments(first, self._shown, pass_group)
        name = f"torch.compile({self.name})" if self.compiled else self.name
        return f"{name}({', '.join(args + [f'{key}={value}' for key, value in kwargs.items()])})"

    def arguments(self, first: Any, value: Callable[[str, str], Any],
                  pass_group: bool) -> tuple[list[Any], dict[str, Any]]:
        """The call's arguments, ``first`` in x's place and ``value(parameter, role)`` for the others:
        the one order :meth:`describe`, :meth:`invoke` and the minimal repro's source all write."""
        positional, keywords = self.passed(pass_group)
        args = [value(parameter, role) for parameter, role in self.leading] + [first]
        args += [value(parameter, role) for parameter, role in positional]
        return args, {parameter: value(parameter, role) for parameter, role in keywords}

    def passed(self, pass_group: bool) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """The ``(parameter, role)`` pairs passed after x, by position and by keyword; an optional
        group is left out unless ``pass_group``."""
        return (tuple(pair for pair in self.positional if self._passes(pair[1], pass_group)),
                tuple(pair for pair in self.keywords if self._passes(pair[1], pass_group)))

    def invoke(self, target: Any, x: torch.Tensor, dim: int, group: Any = None, *, pass_group: bool = False,
               sizes: dict[str, list[int]] | None = None, scatter_dim: int | None = None, op: str = "sum",
               root: int = 0, waited: list[Any] | None = None) -> Any:
        """Call ``target`` on ``x`` this way; ``group`` ``None`` is the world group, ``sizes`` the
        case's split sizes for this rank by role (a fresh list per call), ``op`` its reduction,
        ``root`` a broadcast's source as a group rank.  The result is read as its caller reads it
        (:func:`~harness.core.outputs.settle`): a work handle returned with it is waited on first,
        and appended to ``waited``."""
        passing = self.takes_group and self._passes("group", pass_group)
        if passing and group is None:
            group = dist.group.WORLD
        values = _Values(dim, group if passing else None, dict(self.kwargs), sizes or {}, x, scatter_dim, op, root)
        split = dim if scatter_dim is None else scatter_dim
        first: Any = list(x.split(values.get("", self.split_input), split)) if self.split_input else x
        if self.x_at_source and not values.at_root():
            first = None
        args, kwargs = self.arguments(first, values.get, pass_group)
        function = compiled(target, self.apply) if self.compiled else target.apply if self.apply else target
        result, handles = settle(function(*args, **kwargs))
        if waited is not None:
            waited.extend(handles)
        return values.outputs if result is None and values.outputs is not None else result  # filled, not returned

    def with_group_source(self) -> Call:
        """This call passing a source or a destination as the rank in the group (``--src-rank group``)."""
        def renamed(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
            return tuple((parameter, ROOT_IN_GROUP.get(role, role)) for parameter, role in pairs)
        return replace(self, positional=renamed(self.positional), keywords=renamed(self.keywords),
                       leading=renamed(self.leading))

    def _passes(self, role: str, pass_group: bool) -> bool:
        return role != "group" or pass_group or not self.group_optional

    def _shown(self, parameter: str, role: str) -> str:
        if role == FIXED:
            return dict(self.kwargs)[parameter]
        return "gather_dim" if role == "dim" and self.takes_scatter_dim else role


#: One ``torch.compile`` wrapper per target object (kept with it, so an id is never reused): a
#: module executed afresh gives a new target, and so a new compile, as a restarted program would.
_COMPILED: dict[tuple[int, bool], tuple[Any, Any]] = {}


def compiled(target: Any, apply: bool) -> Any:
    """``torch.compile`` of ``target`` (of ``target.apply`` for an ``autograd.Function``), made once."""
    key = (id(target), apply)
    if key not in _COMPILED or _COMPILED[key][0] is not target:
        _COMPILED[key] = (target, torch.compile(target.apply if apply else target))
    return _COMPILED[key][1]


class _Values:
    """The value of each role for one call; rank and size are asked of torch only when passed."""

    def __init__(self, dim: int, group: Any, fixed: dict[str, str], sizes: dict[str, list[int]],
                 x: torch.Tensor | None = None, scatter_dim: int | None = None, op: str = "sum", root: int = 0) -> None:
        self.dim, self.group, self.fixed, self.sizes, self.x, self.op = dim, group, fixed, sizes, x, op
        #: A source or a destination as a rank of :attr:`group` (the world where none is passed).
        self.root = root
        self.scatter_dim = dim if scatter_dim is None else scatter_dim
        #: The output given to the target to fill, if it takes one (a list, or ``dist.scatter``'s slot
        #: tensor): what it returns, when it returns None.
        self.outputs: list[torch.Tensor] | torch.Tensor | None = None

    def at_root(self) -> bool:
        """Whether this rank is the source or the destination (:attr:`root`, a rank of :attr:`group`)."""
        return dist.get_rank(self.group) == self.root

    def get(self, parameter: str, role: str) -> Any:
        if role == "dim":
            return self.dim
        if role == "scatter_dim":
            return self.scatter_dim
        if role in self.sizes:
            return list(self.sizes[role])
        if role == "output_list" and self.x is not None:
            self.outputs = [self.x.new_empty(rows_shape(self.x.shape, self.dim, n))
                            for n in self.sizes["output_split_sizes"]]
            return self.outputs
        if role == "gather_list":  # dist.gather's: one piece like x per member at the destination, None elsewhere
            self.outputs = [self.x.new_empty(self.x.shape) for _ in range(dist.get_world_size(self.group))] if (
                self.x is not None and self.at_root()) else None
            return self.outputs
        if role == "output_slot" and self.x is not None:  # dist.scatter's output: this member's slot, to fill
            self.outputs = self.x.new_empty(rows_shape(self.x.shape, self.dim,
                                                       self.sizes["split_sizes"][dist.get_rank(self.group)]))
            return self.outputs
        if role == "group":
            return self.group
        if role == "op":
            return getattr(dist.ReduceOp, REDUCE_OPS[self.op][0])
        if role == "op_name":
            return REDUCE_OPS[self.op][1]
        if role in ROOT_IN_GROUP:  # c10d's convention: the root's global rank
            return self.root if self.group is None else dist.get_global_rank(self.group, self.root)
        if role in ROOT_IN_GROUP.values():
            return self.root
        if role == "rank":
            return dist.get_rank(self.group)
        if role == "world_size":
            return dist.get_world_size(self.group)
        return ast.literal_eval(self.fixed[parameter])  # a fresh object per call, as a literal in a script is


def rows_shape(shape: Any, dim: int, rows: int) -> list[int]:
    """``shape`` with ``rows`` along ``dim``: the shape of an output piece of that many rows."""
    shape = list(shape)
    shape[dim] = rows
    return shape
