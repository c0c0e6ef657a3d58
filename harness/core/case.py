"""The case model: one example as plain data, laid out into tensors (values: :mod:`harness.core.values`).

A :class:`Case` is frozen, picklable, JSON-able and prints as one short line.  Ranks, the
reference and repro scripts rebuild their tensors from it (:func:`make_input`,
:func:`make_cotangent`), so the same case yields the same bits everywhere.

A rank's spec shape is what it holds in a gather, its *slot* in a reduce-scatter (every member
holds all the slots), and what it holds in an all-to-all, whose ``splits`` say the rows it
sends each member (:meth:`Case.input_shape`, :meth:`Case.output_shape`).  ``groups`` is empty
(the world gathers, no group passed) or disjoint groups of global ranks; a rank in none is
idle.  Slots follow the group rank, ascending global rank, so every per-rank quantity is taken
within the rank's group (:meth:`Case.members`).

Embedded in repro scripts: it imports only torch, the standard library and core modules, relatively.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace

import torch

from .contract import COLLECTIVES
from .outputs import OUTPUTS
from .values import companion_values, lay_out, normal, shared_values, small_ints

#: Input layouts; everything but ``contiguous`` is a view into a larger base tensor so that a
#: variant reading storage directly (``data_ptr``, ``.view`` on the base, ...) is caught.
LAYOUTS: tuple[str, ...] = ("contiguous", "transposed", "strided", "offset")
#: Value recipes, simplest first (Hypothesis shrinks ``sampled_from`` toward the front).
VALUE_RECIPES: tuple[str, ...] = ("iota", "padding", "special", "random")
#: The recipes of a reduction, whose result is arithmetic: no infinities, no value whose sum
#: overflows, so every evaluation order has a bound (``normal``: finite random values, small
#: integers for integer dtypes).  ``max`` also leaves out ``padding``'s NaNs, whose order
#: against numbers is the backend's choice.
REDUCTION_RECIPES: tuple[str, ...] = ("iota", "padding", "normal")
MAX_RECIPES: tuple[str, ...] = ("iota", "normal")
ALL_RECIPES: tuple[str, ...] = (*VALUE_RECIPES, "normal")
#: Cotangent recipes: exact small integers (sums are exact) or general floats.
COTANGENT_RECIPES: tuple[str, ...] = ("ints", "floats")
COTANGENT_LAYOUTS: tuple[str, ...] = ("contiguous", "transposed", "strided")


def recipes_for(reduces: bool, op: str) -> tuple[str, ...]:
    """The value recipes a collective's cases draw: a reduction's have a sum (or an order) in any
    evaluation order (:data:`REDUCTION_RECIPES`), data movement draws every bit pattern."""
    if not reduces:
        return VALUE_RECIPES
    return MAX_RECIPES if op in ("max", "min") else REDUCTION_RECIPES


@dataclass(frozen=True)
class RankSpec:
    """What one rank holds: its input shape and layout, value recipe, and cotangent recipe."""

    shape: tuple[int, ...]
    layout: str = "contiguous"
    values: str = "iota"
    seed: int = 0
    cotangent: str = "ints"
    cotangent_layout: str = "contiguous"
    #: All-to-all only: the rows this rank sends to each member of its group, in member order.
    splits: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        object.__setattr__(self, "splits", tuple(int(n) for n in self.splits))
        _check_choice("layout", self.layout, LAYOUTS)
        _check_choice("values", self.values, ALL_RECIPES)
        _check_choice("cotangent", self.cotangent, COTANGENT_RECIPES)
        _check_choice("cotangent_layout", self.cotangent_layout, COTANGENT_LAYOUTS)

    def describe(self, *, with_cotangent: bool = False, holds: tuple[int, ...] | None = None) -> str:
        """``(3,2) strided random#7 C=ints``; ``holds``: what the rank holds when its shape is
        a reduce-scatter's slot, shown as ``(5,2)->slot (3,2)``."""
        parts = [_shape_text(self.shape) if holds is None else f"{_shape_text(holds)}->slot {_shape_text(self.shape)}"]
        if self.layout != "contiguous":
            parts.append(self.layout)
        parts.append(self.values if self.values == "iota" else f"{self.values}#{self.seed}")
        if self.splits:
            parts.append("sends " + "+".join(map(str, self.splits)))
        if with_cotangent:
            layout = "" if self.cotangent_layout == "contiguous" else f" {self.cotangent_layout}"
            parts.append(f"C={self.cotangent}{layout}")
        return " ".join(parts)


@dataclass(frozen=True)
class Case:
    """One example: world size (= ``len(ranks)``), backend, device, dim, dtype, per-rank specs.

    - ``output``: ``stack`` results allow 0-d inputs (then ``dim`` is 0).
    - ``world_group``: pass the world group to an optional group parameter (no layout only); part
      of the case, so a replay or a repro makes the same call.
    - ``scatter_dim``: a re-layout all-to-all splits each input along it (the same ``splits`` on
      every member) and concatenates what it receives along ``dim``; ``None``: both are ``dim``.
    """

    ranks: tuple[RankSpec, ...]
    dim: int = 0
    dtype: str = "float32"
    grad: str = "none"
    backend: str = "gloo"
    device: str = "cpu"
    groups: tuple[tuple[int, ...], ...] = ()
    output: str = "tensor"
    world_group: bool = False
    collective: str = "gather"
    op: str = "sum"
    scatter_dim: int | None = None
    #: A broadcast's or a scatter's source, a reduce's or a gather-to's destination, as a rank in each
    #: group (the group's member at that place).
    root: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranks", tuple(self.ranks))
        object.__setattr__(self, "groups", tuple(tuple(sorted(int(r) for r in g)) for g in self.groups))
        if not self.ranks:
            raise ValueError("a case needs at least one rank")
        _check_choice("output", self.output, tuple(OUTPUTS))
        ndim = len(self.ranks[0].shape)
        if ndim == 0 and (not OUTPUTS[self.output].stacked or self.dim != 0):
            raise ValueError("0-d inputs need output='stack' and dim=0")
        if ndim and not -ndim <= self.dim < ndim:
            raise ValueError(f"dim={self.dim} is out of range for {ndim}-d shapes")
        # ranks differ along dim; a re-layout's groups also each cut their own scatter dim
        free = {self.dim % ndim if ndim else 0}
        if self.scatter_dim is not None and ndim and -ndim <= self.scatter_dim < ndim:
            free.add(self.scatter_dim % ndim)
        for r, spec in enumerate(self.ranks):
            if len(spec.shape) != ndim or any(
                a != b for i, (a, b) in enumerate(zip(spec.shape, self.ranks[0].shape)) if i not in free
            ):
                off = f"dim {self.dim}" + ("" if len(free) == 1 else f" and scatter_dim {self.scatter_dim}")
                raise ValueError(f"rank {r} shape {spec.shape} differs from rank 0 {self.ranks[0].shape} off {off}")
        self._check_groups()
        self._check_collective()

    def _check_collective(self) -> None:
        _check_choice("collective", self.collective, tuple(COLLECTIVES))
        kind = COLLECTIVES[self.collective]
        if self.op != "sum" and self.op not in kind.ops:
            raise ValueError(f"op={self.op!r}: {self.collective} takes {', '.join(kind.ops) or 'no reduction'}")
        if self.output not in kind.outputs:
            raise ValueError(f"output={self.output!r}: {self.collective} results read as {', '.join(kind.outputs)}")
        self._check_relayout()
        if self.root and (not kind.root_name or any(len(g) <= self.root for g in self.layout())):
            raise ValueError(f"root={self.root}: only a collective from a source or to a destination has one, a rank "
                             f"of every group (groups {self.layout()})")
        if kind.dimless:
            for r, spec in enumerate(self.ranks):
                first = self.ranks[self.members(r)[0]] if self.members(r) else spec
                if spec.shape != first.shape:
                    raise ValueError(f"rank {r} shape {spec.shape}: in a {self.collective} every member holds one "
                                     f"shape, as rank {self.members(r)[0]} does: {first.shape}")
        for r, spec in enumerate(self.ranks):
            members = self.members(r)
            if self.collective != "all-to-all" or not members:
                if spec.splits:
                    raise ValueError(f"rank {r} splits={spec.splits}: only a member of an all-to-all sends splits")
                continue
            length = spec.shape[self.split_axis]
            if len(spec.splits) != len(members) or sum(spec.splits) != length:
                raise ValueError(f"rank {r} splits={spec.splits}: need one per member of {members}, summing to its "
                                 f"length {length} along dim {self.split_axis}")
            if self.relayout and spec.splits != self.ranks[members[0]].splits:
                raise ValueError(f"rank {r} splits={spec.splits}: in a re-layout every member of a group sends each "
                                 f"the same pieces, as rank {members[0]} does: {self.ranks[members[0]].splits}")

    def _check_relayout(self) -> None:
        if self.scatter_dim is None:
            return
        if self.collective != "all-to-all":
            raise ValueError(f"scatter_dim={self.scatter_dim}: only an all-to-all scatters along another dim")
        if not -self.ndim <= self.scatter_dim < self.ndim or self.scatter_dim % self.ndim == self.dim % self.ndim:
            raise ValueError(f"scatter_dim={self.scatter_dim}: need a dim of the {self.ndim}-d inputs other than "
                             f"dim={self.dim}")

    @property
    def relayout(self) -> bool:
        """An all-to-all scattering one dim and gathering along another (:attr:`scatter_dim`)."""
        return self.scatter_dim is not None

    @property
    def split_axis(self) -> int:
        """The axis (0..ndim-1) an all-to-all splits each rank's input along into its ``splits``."""
        return (self.dim if self.scatter_dim is None else self.scatter_dim) % max(self.ndim, 1)

    def _check_groups(self) -> None:
        members = [r for group in self.groups for r in group]
        if self.world_group and self.groups:
            raise ValueError(f"groups={self.groups}: world_group is for cases without a group layout")
        if any(not group for group in self.groups):
            raise ValueError(f"groups={self.groups}: a group needs at least one rank")
        if len(set(members)) != len(members) or not all(0 <= r < self.world_size for r in members):
            raise ValueError(f"groups={self.groups}: groups must be disjoint sets of ranks 0..{self.world_size - 1}")

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def ndim(self) -> int:
        return len(self.ranks[0].shape)

    @property
    def lengths(self) -> tuple[int, ...]:
        """Each rank's length along the gather dim (1 for a 0-d input: one entry of the stack)."""
        return tuple(spec.shape[self.dim] if spec.shape else 1 for spec in self.ranks)

    @property
    def is_ragged(self) -> bool:
        """Some group holds different lengths along the gather dim (an all-to-all: sends different splits)."""
        if self.collective == "all-to-all" and any(len({n for m in group for n in self.ranks[m].splits}) > 1
                                                   for group in self.layout()):
            return True
        if self.collective == "all-to-all" and not self.relayout:
            return False
        return any(len({self.lengths[m] for m in group}) > 1 for group in self.layout())

    def layout(self) -> tuple[tuple[int, ...], ...]:
        """The groups that gather: ``groups``, or the whole world as one."""
        return self.groups or (tuple(range(self.world_size)),)

    def groups_text(self) -> str:
        """The group layout as case lines show it: ``{1,3}+{0}``."""
        return "+".join("{" + ",".join(map(str, group)) + "}" for group in self.groups)

    def members(self, rank: int) -> tuple[int, ...]:
        """The global ranks of ``rank``'s group in slot (group rank) order; ``()`` for an idle rank."""
        return next((group for group in self.layout() if rank in group), ())

    def idle(self, rank: int) -> bool:
        return not self.members(rank)

    def judged(self, rank: int) -> bool:
        """Whether ``rank``'s result is judged: every member's, but in a reduce or a gather to one rank
        only the destination's (the others may return None, their input or anything)."""
        members = self.members(rank)
        return bool(members) and (not COLLECTIVES[self.collective].to_root or members[self.root] == rank)

    def without(self, rank: int) -> Case | None:
        """This case with rank ``rank`` gone and the later ranks renumbered, empty groups dropped
        (in an all-to-all its peers no longer send it their split); ``None`` if that is no case."""
        if self.world_size == 1:
            return None
        groups = tuple(group for group in (tuple(m - (m > rank) for m in g if m != rank) for g in self.groups) if group)
        if self.groups and not groups:
            return None
        if any(len(group) <= self.root for group in groups or (range(self.world_size - 1),)):
            return None  # a broadcast's source would be gone from a group
        ranks = [self._not_sending_to(sender, rank) for sender in range(self.world_size)]
        return replace(self, ranks=tuple(ranks[:rank] + ranks[rank + 1:]), groups=groups)

    def _not_sending_to(self, sender: int, gone: int) -> RankSpec:
        """``sender``'s spec once ``gone`` left its group (an all-to-all's loses its split for ``gone``)."""
        spec, members = self.ranks[sender], self.members(sender)
        if self.collective != "all-to-all" or gone not in members or sender == gone or not spec.splits:
            return spec
        at = members.index(gone)
        shape = list(spec.shape)
        shape[self.split_axis] -= spec.splits[at]
        return replace(spec, shape=tuple(shape), splits=spec.splits[:at] + spec.splits[at + 1:])

    def merged(self, rank: int) -> Case | None:
        """This case with rank ``rank``'s length added to the member before it and ``rank`` gone: as
        many elements on one rank fewer.  ``None`` where there is no such member or length to move."""
        members = self.members(rank)
        smaller = self.without(rank)
        if (smaller is None or not self.ndim or not members or members[0] == rank
                or self.collective == "all-to-all" or COLLECTIVES[self.collective].dimless):
            return None
        before = members[members.index(rank) - 1]
        shape = list(self.ranks[before].shape)
        shape[self.dim % self.ndim] += self.lengths[rank]
        ranks = list(smaller.ranks)
        ranks[before] = replace(ranks[before], shape=tuple(shape))
        return replace(smaller, ranks=tuple(ranks))

    @property
    def passes_group(self) -> bool:
        """Whether the target is given a group: its layout's, or the world group it asks for."""
        return bool(self.groups) or self.world_group

    def gathered_shape(self, rank: int = 0) -> tuple[int, ...]:
        """The shape of what rank ``rank`` gathers: the concatenation in its group, or the stack."""
        members = self.members(rank)
        if OUTPUTS[self.output].stacked:
            return (len(members), *self.ranks[rank].shape)
        shape = list(self.ranks[rank].shape)
        shape[self.dim % self.ndim] = sum(self.lengths[m] for m in members)
        return tuple(shape)

    def offset(self, rank: int) -> int:
        """Where rank ``rank``'s slot starts along the gather dim of its group's result."""
        members = self.members(rank)
        return sum(self.lengths[m] for m in members[: members.index(rank)])

    def input_shape(self, rank: int) -> tuple[int, ...]:
        """What rank ``rank`` holds: its spec's shape, or, in a reduce-scatter, every slot of its group."""
        if COLLECTIVES[self.collective].slotted and not self.idle(rank):
            return self.gathered_shape(rank)
        return self.ranks[rank].shape

    def output_shape(self, rank: int) -> tuple[int, ...]:
        """What rank ``rank`` gets (its cotangent's shape)."""
        if COLLECTIVES[self.collective].slotted or COLLECTIVES[self.collective].dimless:
            return self.ranks[rank].shape
        if self.collective == "all-to-all":
            shape = list(self.ranks[rank].shape)
            shape[self.dim % self.ndim] = sum(self.sent_rows(m, rank) for m in self.members(rank))
            if self.relayout:
                shape[self.split_axis] = self.received(rank)[0]
            return tuple(shape)
        return self.gathered_shape(rank)

    def slot_sizes(self, rank: int) -> list[int]:
        """Each member's slot length in ``rank``'s group: a reduce-scatter's ``split_sizes``."""
        return [self.lengths[m] for m in self.members(rank)]

    def received(self, rank: int) -> list[int]:
        """All-to-all: the rows (along the split axis) each member of ``rank``'s group sends it."""
        members = self.members(rank)
        return [self.ranks[s].splits[members.index(rank)] for s in members]

    def sent_rows(self, sender: int, receiver: int) -> int:
        """All-to-all: the length along ``dim`` of ``sender``'s piece in ``receiver``'s result (its
        whole length in a re-layout); together, ``receiver``'s ``output_split_sizes``."""
        if self.relayout:
            return self.lengths[sender]
        return self.ranks[sender].splits[self.members(sender).index(receiver)]

    def sent_offset(self, sender: int, receiver: int) -> int:
        """All-to-all: where the rows ``sender`` sends ``receiver`` start along the split axis in its input."""
        members = self.members(sender)
        return sum(self.ranks[sender].splits[: members.index(receiver)])

    def received_offset(self, receiver: int, sender: int) -> int:
        """All-to-all: where the piece from ``sender`` starts along dim in ``receiver``'s result."""
        members = self.members(receiver)
        return sum(self.sent_rows(m, receiver) for m in members[: members.index(sender)])

    def describe(self) -> str:
        """One readable line, e.g. ``W=2 gloo/cpu float32 dim=0 grad=sum | r0 (3,2) iota | r1 (0,2) iota``."""
        dims = f"dim={self.dim}" if self.scatter_dim is None else f"scatter_dim={self.scatter_dim} gather_dim={self.dim}"
        dims = "" if COLLECTIVES[self.collective].dimless else f" {dims}"
        head = f"W={self.world_size} {self.backend}/{self.device} {self.dtype}{dims} grad={self.grad}"
        if self.collective != "gather":
            kind = COLLECTIVES[self.collective]
            said = [self.op] if kind.reduces else []
            said += [f"{kind.root_name}={self.root}"] if kind.root_name else []
            head = f"{self.collective}{'(' + ', '.join(said) + ')' if said else ''} {head}"
        if self.output != "tensor":
            head += f" output={self.output}"
        if self.groups:
            head += " groups=" + self.groups_text()
        if self.world_group:
            head += " group=WORLD"
        grad = self.grad != "none"
        slots = COLLECTIVES[self.collective].slotted
        ranks = [f"r{r} idle" if self.idle(r) else
                 f"r{r} {spec.describe(with_cotangent=grad, holds=self.input_shape(r) if slots else None)}"
                 for r, spec in enumerate(self.ranks)]
        return " | ".join([head] + ranks)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_dict(self) -> dict:
        """The case as plain data; later fields only when not their defaults, so older cases read
        (and hash, as the sampled stability calls do) as they always did."""
        data = asdict(self)
        for name in ("world_group", "collective", "op", "scatter_dim", "root"):
            if data[name] == Case.__dataclass_fields__[name].default:
                del data[name]
        for spec in data["ranks"]:
            if not spec["splits"]:
                del spec["splits"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Case:
        ranks = tuple(RankSpec(**{**spec, "shape": tuple(spec["shape"])}) for spec in data["ranks"])
        groups = tuple(tuple(group) for group in data.get("groups", ()))
        return cls(**{**data, "ranks": ranks, "groups": groups})

    @classmethod
    def from_json(cls, text: str) -> Case:
        return cls.from_dict(json.loads(text))


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def make_input(
    case: Case, rank: int, *, requires_grad: bool = False, device: str | None = None, companion: bool = False
) -> torch.Tensor:
    """Rebuild rank ``rank``'s input: values from its recipe, laid out as its spec says.

    With ``requires_grad`` the *base* tensor is the leaf, so a non-contiguous input is a
    differentiable view, as in a model.  ``companion``: every bit inverted, so a shared output
    buffer shows in the second call.
    """
    x = lay_out(input_values(case, rank, companion=companion), case.ranks[rank].layout, requires_grad)
    return x if device is None else x.to(device)


def input_values(case: Case, rank: int, *, companion: bool = False) -> torch.Tensor:
    """Rank ``rank``'s input values, contiguous, in its shape: what a reference needs (a layout
    changes no value); a replicated collective's are its group's first member's.  Possibly kept for
    the next build (:func:`shared_values`): never to be written to."""
    members = case.members(rank)
    source = members[0] if COLLECTIVES[case.collective].replicated and members else rank
    spec = case.ranks[source]
    shape = case.input_shape(rank)
    values = shared_values(spec.values, torch_dtype(case.dtype), math.prod(shape), source, spec.seed)
    if companion:
        values = companion_values(values, reduction=COLLECTIVES[case.collective].reduces)
    return values.reshape(shape)


def make_cotangent(case: Case, rank: int, *, device: str | None = None) -> torch.Tensor:
    """The cotangent rank ``rank`` feeds to ``Y.backward``, shaped as :meth:`Case.output_shape`;
    different on every rank."""
    spec = case.ranks[rank]
    dtype = torch_dtype(case.dtype)
    shape = case.output_shape(rank)
    n = math.prod(shape)
    if spec.cotangent == "ints":
        values = small_ints(n, rank, spec.seed, dtype)
    else:
        values = normal(n, rank, spec.seed, dtype)
    c = lay_out(values.reshape(shape), spec.cotangent_layout, requires_grad=False)
    return c if device is None else c.to(device)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ",".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r}, but should be one of {choices}")
