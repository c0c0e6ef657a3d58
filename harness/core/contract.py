"""What a gather variant promises: the contract the harness holds it to.

A contract is plain data so that the CLI, the pytest plugin, the catalogue and the
strategies all describe a variant the same way.  Ranks never need it.

One concern: the claim and its refusals.  The table of collectives, what each takes (dims, ops,
roots, gradient contracts) and every check that turns an impossible claim into exit 2 live
together, so that a claim is judged in one place before any rank starts.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .errors import UsageError
from .outputs import OUTPUTS, Output

#: Every dtype name the harness knows; which of them a backend really supports is measured
#: (``harness.pool.capabilities``), never assumed.
ALL_DTYPES: tuple[str, ...] = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
DTYPE_GROUPS: dict[str, tuple[str, ...]] = {
    "all": ALL_DTYPES,
    "float": ("float16", "bfloat16", "float32", "float64"),
    "complex": ("complex64", "complex128"),
    "int": ("uint8", "int8", "int16", "int32", "int64"),
    "bool": ("bool",),
}
DIFFERENTIABLE_DTYPES: frozenset[str] = frozenset(DTYPE_GROUPS["float"] + DTYPE_GROUPS["complex"])
GRAD_CONTRACTS: tuple[str, ...] = ("none", "local", "sum", "mean", "adjoint", "identity")


def mesh_layout(world: int, size: int, columns: bool) -> tuple[tuple[int, ...], ...]:
    """The groups of one dimension of a 2-D mesh over ``world`` ranks, ``size`` ranks each: its
    columns (strided sets) or its rows (contiguous blocks)."""
    count = world // size
    if columns:
        return tuple(tuple(range(c, world, count)) for c in range(count))
    return tuple(tuple(range(k * size, (k + 1) * size)) for k in range(count))


def is_mesh_layout(groups: tuple[tuple[int, ...], ...], world: int) -> bool:
    """Whether ``groups`` is one dimension of a 2-D mesh over ``world`` ranks (what ``mesh`` contracts pass)."""
    return any(groups == mesh_layout(world, size, columns) for size in range(1, world + 1) if world % size == 0
               for columns in (False, True))


@dataclass(frozen=True)
class Collective:
    """One kind of collective the harness checks (``--collective``); shapes are
    :class:`harness.core.case.Case`'s, what is right :mod:`harness.reference`'s."""

    name: str
    #: What rank r gets, for ``--collective``'s help.
    means: str
    #: The gradient contracts it can be held to, besides ``none``.
    grads: tuple[str, ...]
    #: How its result may read (``--output``); the first is what ``auto`` reads as until a probe says.
    outputs: tuple[str, ...]
    #: Argument roles it binds by name besides dim, group, rank and world size (``harness.core.conventions``);
    #: the first is also the sizes x is split by for a target that takes a list of pieces.
    roles: tuple[str, ...] = ()
    #: Reductions it takes (``--op``); empty: it moves data and takes none.
    ops: tuple[str, ...] = ()
    #: Its result has the input's shape and no dim is involved (an all-reduce): cases draw equal
    #: shapes in each group, dim 0, and a target is never asked for a dim.
    dimless: bool = False
    #: A target may return nothing and leave the result in its input (``dist.all_reduce(x)``):
    #: that is read as its result, never as a write into the input.
    in_place: bool = False
    #: Every member holds the same x (the group's first member's values, each rank its own layout):
    #: Megatron's copy-to-region and scatter-to-region take a replicated activation.
    replicated: bool = False
    #: Rank r holds every slot of its group's result and gets slot r (a reduce-scatter, a split).
    slotted: bool = False
    #: One member, the source (``--src``, a group rank), decides every member's result (a broadcast, a scatter).
    rooted: bool = False
    #: Only one member's result, the destination's (``--dst``, a group rank), is judged (a reduce, a
    #: gather to one rank): the others may return None, their input or anything.
    to_root: bool = False

    @property
    def root_name(self) -> str:
        """``src`` for a collective from a source, ``dst`` for one to a destination, ``""`` without a root:
        how its root is spelled in flags, case lines and claims."""
        return "dst" if self.to_root else "src" if self.rooted else ""

    @property
    def reduces(self) -> bool:
        """Its result is computed, not moved: compared within a rounding bound, never bit for bit."""
        return bool(self.ops)


#: The bitwise reductions: gloo has them (integers only), NCCL has not.
BITWISE_OPS: tuple[str, ...] = ("band", "bor", "bxor")
#: The reductions an all-reduce and a reduce take (``--op``).
REDUCING_OPS: tuple[str, ...] = ("sum", "mean", "max", "min", "product", *BITWISE_OPS)
#: The collectives, the one table of them; ``gather`` first: the default everywhere.
COLLECTIVES: dict[str, Collective] = {collective.name: collective for collective in (
    Collective("gather", "the concatenation along dim of every rank's x", grads=("local", "sum", "mean"),
               outputs=("tensor", "list", "stack", "first")),
    Collective("reduce-scatter", "slot r of the reduction over ranks of their x (slots: split_sizes, equal by "
               "default)", grads=("adjoint",), outputs=("tensor", "first"), roles=("split_sizes",),
               ops=("sum", "mean", "max"), slotted=True),
    Collective("all-to-all", "from each rank s, in rank order, the rows s sends to r (input_split_sizes on s, "
               "output_split_sizes on r)", grads=("adjoint",), outputs=("tensor", "list", "first"),
               roles=("input_split_sizes", "output_split_sizes", "output_list", "scatter_dim")),
    Collective("all-reduce", "the reduction over ranks of their x (every member holds x of one shape)",
               grads=("identity", "sum", "mean"), outputs=("tensor", "first"), roles=("op",),
               ops=REDUCING_OPS, dimless=True, in_place=True),
    Collective("split", "slot r of x, the same x on every member (slots: split_sizes, equal by default)",
               grads=("adjoint",), outputs=("tensor", "first"), roles=("split_sizes",), replicated=True, slotted=True),
    Collective("copy", "x itself, the same x on every member (copy-to-region: identity forward, all-reduced "
               "gradient)", grads=("sum",), outputs=("tensor", "first"), dimless=True, replicated=True),
    Collective("broadcast", "x of the source, group rank --src (every member holds x of one shape)",
               grads=("sum",), outputs=("tensor", "first"), roles=("src",), dimless=True, in_place=True, rooted=True),
    Collective("scatter", "slot r of the source's x, group rank --src (slots: split_sizes, equal by default; the "
               "other members' x are not read)", grads=("adjoint",), outputs=("tensor", "first"),
               roles=("split_sizes", "src", "scatter_list"), slotted=True, rooted=True),
    Collective("reduce", "the reduction over ranks of their x where r is the destination, group rank --dst (every "
               "member holds x of one shape; the other members' results are not judged)", grads=("adjoint",),
               outputs=("tensor", "first"), roles=("op", "dst"), ops=REDUCING_OPS, dimless=True,
               in_place=True, to_root=True),
    Collective("gather-to", "the concatenation along dim of every rank's x where r is the destination, group rank "
               "--dst (the other members' results are not judged)", grads=("adjoint",),
               outputs=("tensor", "list", "stack", "first"), roles=("dst", "gather_list"), to_root=True),
)}
#: How a target takes its source or destination (``--src-rank``): as a global rank (c10d's
#: ``dist.broadcast(x, src)``, ``torch.distributed.nn.functional.broadcast``) or as a rank in the group
#: (funcol's ``broadcast``).
SRC_RANKS: tuple[str, ...] = ("global", "group")
#: A gradient contract's name in another collective: a gather's ``local`` (each rank its own
#: cotangent's slot) is an all-reduce's ``identity``.
SAME_GRADIENT: dict[str, str] = {"local": "identity", "identity": "local"}
#: Other names of a reduction, as torch spells them (``ReduceOp.AVG``, funcol's ``"avg"``).
OP_ALIASES: dict[str, str] = {"avg": "mean"}
#: The reductions with no gradient contract, and why.
UNGRADED_OPS: dict[str, str] = {
    "max": "ties have no one right answer", "min": "ties have no one right answer",
    "product": "it is checked on integers, which have none", **{op: "integers have none" for op in BITWISE_OPS}}
#: What each reduction accepts: max needs an order (no complex), mean a division (no integers);
#: none of them is defined for bool.
OP_DTYPES: dict[str, tuple[str, ...]] = {
    "sum": tuple(name for name in ALL_DTYPES if name != "bool"),
    "mean": DTYPE_GROUPS["float"] + DTYPE_GROUPS["complex"],
    "max": DTYPE_GROUPS["int"] + DTYPE_GROUPS["float"],
    "min": DTYPE_GROUPS["int"] + DTYPE_GROUPS["float"],
    # integers only: exact in any order, wrapping as every backend multiplies them (a float product's
    # rounding has no bound the value recipes keep: they overflow float16 at W=4)
    **{op: DTYPE_GROUPS["int"] for op in ("product", *BITWISE_OPS)},
}
#: How a target's result may be read; ``auto``: detected by the probe.
OUTPUT_OPTIONS: tuple[str, ...] = ("auto", *OUTPUTS)
#: The most ranks a case may have: torchrun jobs go this far; a local pool is capped by the
#: machine's memory (``harness.pool.machine.local_world_size_limit``).
MAX_WORLD_SIZE = 64
#: The dims of drawn inputs: 1-d up to 4-d (``stack`` results add 0-d ones).
NDIMS: tuple[int, int] = (1, 4)
BACKENDS: tuple[str, ...] = ("gloo", "nccl")
DEVICES: tuple[str, ...] = ("cpu", "cuda")


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def parse_dtypes(text: str) -> tuple[str, ...]:
    """Expand a comma list of dtype names and groups (``all``, ``float``, ...) in a stable order."""
    wanted: set[str] = set()
    for item in (part.strip() for part in text.split(",")):
        if item in DTYPE_GROUPS:
            wanted.update(DTYPE_GROUPS[item])
        elif item in ALL_DTYPES:
            wanted.add(item)
        else:
            known = ", ".join(list(DTYPE_GROUPS) + [d for d in ALL_DTYPES if d not in DTYPE_GROUPS])
            raise UsageError(f"--dtypes: unknown dtype {item!r}; use a comma list of: {known}")
    return tuple(name for name in ALL_DTYPES if name in wanted)


def parse_world_sizes(text: str) -> tuple[int, int]:
    """``"1-4"`` -> (1, 4); ``"3"`` -> (3, 3)."""
    lo_text, _, hi_text = text.partition("-")
    try:
        lo = int(lo_text)
        hi = int(hi_text) if hi_text else lo
    except ValueError:
        raise UsageError(f"--world-sizes: {text!r} is not a range like 1-4") from None
    if not 1 <= lo <= hi <= MAX_WORLD_SIZE:
        raise UsageError(f"--world-sizes: need 1 <= A <= B <= {MAX_WORLD_SIZE}, got {text!r}")
    return lo, hi


def parse_kwarg(text: str, option: str = "--kwarg") -> tuple[str, str]:
    """``"sync_grads=True"`` -> ``("sync_grads", "True")``: a fixed argument, its value a Python literal."""
    name, sep, value = (part.strip() for part in text.partition("="))
    if not sep or not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(f"{option} {text!r}: expected NAME=LITERAL, e.g. {option} sync_grads=True")
    check_literal(name, value, option)
    return name, value


def check_literal(name: str, value: str, option: str = "--kwarg") -> None:
    """Raise :class:`UsageError` unless ``value`` is the source of a Python literal (ranks evaluate it)."""
    try:
        ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UsageError(f"{option} {name}={value}: {value!r} is not a Python literal (True, 3, 0.5, None, 'text' "
                         f"with its quotes, (1, 2), ...); a tensor or any other object needs a wrapper") from None


def literal_kwargs(values: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """``{"sync_grads": True}`` -> ``(("sync_grads", "True"),)``: only values whose ``repr`` reads
    back equal travel to the ranks."""
    pairs = []
    for name, value in values.items():
        text = repr(value)
        try:
            same = ast.literal_eval(text) == value
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            same = False
        if not same:
            raise UsageError(f"kwargs[{name!r}]={text}: only Python literals (numbers, strings, True/False/None, and "
                             f"tuples, lists, dicts, sets of them) travel to the ranks; wrap the target for anything else")
        pairs.append((name, text))
    return tuple(pairs)


@dataclass(frozen=True)
class Contract:
    """What a gather variant claims, and how it is called (the options are docs/checking.md's).

    - ``dims``: ``"any"`` or one fixed dim: a target that works along that dim only.
    - ``groups``: cases also draw subgroup layouts and pass ``group=``; ``None`` until the probe
      decides.  ``mesh``: those layouts are one dimension of a 2-D device mesh.
    - ``kwargs``: fixed ``(name, literal source)`` arguments: part of what is checked, so of :meth:`describe`.
    - ``bits``: results must be bit-identical, not only equal in value (``False`` for gathers built
      with arithmetic); what is judged, not drawn, so not in :meth:`describe`.
    - ``optional_group``: the probe found the group optional: cases draw whether it is passed.
    - ``scatter_dim``, ``gather_dim``: an all-to-all that is a re-layout (:attr:`relayout`), each
      ``"any"`` or a fixed dim; ``""`` both: a one-dim all-to-all.
    """

    ragged: bool = True
    dims: str = "any"
    dtypes: tuple[str, ...] = ALL_DTYPES
    grad: str = "none"
    backends: tuple[str, ...] = ("gloo",)
    devices: tuple[str, ...] = ("cpu",)
    world_sizes: tuple[int, int] = field(default=(1, 4))
    output: str = "auto"
    groups: bool | None = False
    mesh: bool = False
    kwargs: tuple[tuple[str, str], ...] = ()
    bits: bool = True
    optional_group: bool = False
    collective: str = "gather"
    op: str = "sum"
    scatter_dim: str = ""
    gather_dim: str = ""
    ndims: tuple[int, int] | None = None
    compile: bool = False
    src: int = 0
    src_rank: str = "global"
    dst: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", OP_ALIASES.get(self.op, self.op))
        self._check_collective()
        self._check_relayout()
        object.__setattr__(self, "kwargs", tuple((str(name), str(value)) for name, value in self.kwargs))
        names = [name for name, _ in self.kwargs]
        for name, value in self.kwargs:
            if not name.isidentifier() or keyword.iskeyword(name):
                raise UsageError(f"--kwarg {name}={value}: {name!r} is not a parameter name")
            if names.count(name) > 1:
                raise UsageError(f"--kwarg {name}: given {names.count(name)} times; give each parameter once")
            check_literal(name, value)
        if self.dims != "any" and not (_is_int(self.dims) and -NDIMS[1] <= int(self.dims) < NDIMS[1]):
            raise UsageError(f"--dims: expected any or a dim of a 1-{NDIMS[1]}-d input ({-NDIMS[1]} to {NDIMS[1] - 1}), "
                             f"got {self.dims!r}")
        object.__setattr__(self, "dims", self.dims if self.dims == "any" else str(int(self.dims)))
        if self.kind.dimless:
            self._check_dimless()
        object.__setattr__(self, "src", int(self.src))
        object.__setattr__(self, "dst", int(self.dst))
        self._check_rooted()
        if self.ndim_range is None:
            raise UsageError(f"--dims {self.dims} --ndims {'-'.join(map(str, self.ndims or NDIMS))}: no input of those "
                             f"dims has dim {self.dims}")
        grads = ("none", *self.kind.grads)
        if self.grad not in grads:
            same = SAME_GRADIENT.get(self.grad, "")
            hint = f"; {self.collective}'s name for that gradient is --grad {same}" if same in grads else ""
            raise UsageError(f"--grad: expected one of {', '.join(grads)} for {self.collective}, got {self.grad!r}{hint}")
        unknown = [d for d in self.dtypes if d not in ALL_DTYPES]
        if unknown or not self.dtypes:
            raise UsageError(f"--dtypes: unknown or empty dtype list {list(self.dtypes)!r}")
        for backend in self.backends:
            if backend not in BACKENDS:
                raise UsageError(f"--backend: expected gloo or nccl, got {backend!r}")
        for device in self.devices:
            if device not in DEVICES:
                raise UsageError(f"--device: expected cpu or cuda, got {device!r}")
        lo, hi = self.world_sizes
        if not 1 <= lo <= hi <= MAX_WORLD_SIZE:
            raise UsageError(f"--world-sizes: need 1 <= A <= B <= {MAX_WORLD_SIZE}, got {lo}-{hi}")
        outputs = ("auto", *self.kind.outputs)
        if self.output not in outputs:
            raise UsageError(f"--output: expected one of {', '.join(outputs)} for {self.collective}, got {self.output!r}")

    def _check_collective(self) -> None:
        if self.collective not in COLLECTIVES:
            raise UsageError(f"--collective: expected one of {', '.join(COLLECTIVES)}, got {self.collective!r}")
        if not self.kind.reduces:
            if self.op != "sum":
                reducing = [name for name, kind in COLLECTIVES.items() if kind.reduces]
                raise UsageError(f"--op {self.op}: {self.collective} takes no reduction; --op is for "
                                 f"{', '.join(reducing[:-1])} and {reducing[-1]}")
            return
        if self.op not in self.kind.ops:
            raise UsageError(f"--op: expected one of {', '.join(self.kind.ops)} for {self.collective}, got {self.op!r}")
        if self.op in UNGRADED_OPS and self.grad != "none":
            raise UsageError(f"--op {self.op} --grad {self.grad}: a {self.op} has no gradient contract "
                             f"({UNGRADED_OPS[self.op]}); check its values with --grad none")
        if self.op in BITWISE_OPS and self.backend == "nccl":
            raise UsageError(f"--op {self.op} --backend nccl: NCCL has no bitwise reduction; check it on gloo")
        allowed = OP_DTYPES[self.op]
        if self.dtypes == ALL_DTYPES:
            object.__setattr__(self, "dtypes", allowed)
        unfit = [name for name in self.dtypes if name not in allowed]
        if unfit:
            raise UsageError(f"--dtypes: {self.op} is not defined for {', '.join(unfit)}; use some of "
                             f"{', '.join(allowed)}")

    def _check_rooted(self) -> None:
        """``--src`` for a collective from a source, ``--dst`` for one to a destination: a group rank
        every world drawn has."""
        for flag, value, applies, which in (("--src", self.src, self.kind.rooted, "a broadcast and a scatter"),
                                             ("--dst", self.dst, self.kind.to_root, "a reduce and a gather-to")):
            if not applies and value != 0:
                raise UsageError(f"{flag} {value}: {self.collective} has no {flag[2:]}; {flag} is for {which}")
            if applies and not 0 <= value < self.world_sizes[0]:
                raise UsageError(f"{flag} {value}: it is a group rank, and every world drawn needs it: give "
                                 f"--world-sizes {value + 1}-{max(self.world_sizes[1], value + 1)} or a {flag} below "
                                 f"{self.world_sizes[0]}")
        if self.src_rank not in SRC_RANKS:
            raise UsageError(f"--src-rank: expected global or group, got {self.src_rank!r}")

    @property
    def root(self) -> int:
        """The group rank a rooted collective starts from (``--src``) or ends at (``--dst``); 0 for the others."""
        return self.dst if self.kind.to_root else self.src

    def _check_dimless(self) -> None:
        """An all-reduce's inputs agree in shape and no dim is involved: drawn at dim 0, equal shapes."""
        if self.dims not in ("any", "0"):
            raise UsageError(f"--dims {self.dims}: {self.collective} works on the whole tensor and takes no dim; "
                             f"leave out --dims")
        object.__setattr__(self, "dims", "0")
        object.__setattr__(self, "ragged", False)

    def _check_relayout(self) -> None:
        for flag, value in (("--scatter-dim", self.scatter_dim), ("--gather-dim", self.gather_dim)):
            if value and value != "any" and not (_is_int(value) and -NDIMS[1] <= int(value) < NDIMS[1]):
                raise UsageError(f"{flag}: expected any or a dim of a 1-{NDIMS[1]}-d input ({-NDIMS[1]} to "
                                 f"{NDIMS[1] - 1}), got {value!r}")
        if self.ndims is not None:
            object.__setattr__(self, "ndims", (int(self.ndims[0]), int(self.ndims[1])))
            low, high = self.ndims
            if not 1 <= low <= high <= NDIMS[1]:
                raise UsageError(f"--ndims: need 1 <= A <= B <= {NDIMS[1]}, got {low}-{high}")
        if not self.relayout:
            return
        if self.collective != "all-to-all":
            raise UsageError(f"--scatter-dim/--gather-dim: a re-layout (scatter one dim, gather along another) is an "
                             f"all-to-all; {self.collective} takes one dim (--dims)")
        if self.dims != "any":
            raise UsageError("--dims: a re-layout's dims are --scatter-dim and --gather-dim; leave out --dims")
        if not self.ndim_range:
            raise UsageError(f"--scatter-dim {self.scatter_dim} --gather-dim {self.gather_dim}: no input of "
                             f"{'-'.join(map(str, self.ndims or NDIMS))} dims has them as two different dims")

    @property
    def backend(self) -> str:
        """The backend a check runs on: the first of :attr:`backends`."""
        return self.backends[0]

    @property
    def device(self) -> str:
        """The device a check runs on: the first of :attr:`devices`."""
        return self.devices[0]

    @property
    def relayout(self) -> bool:
        """An all-to-all that scatters one dim and gathers the pieces along another: sequence-parallel
        attention's heads-for-sequence exchange."""
        return bool(self.scatter_dim or self.gather_dim)

    @property
    def fixed_dims(self) -> dict[str, int]:
        """A re-layout's dims given as numbers (``--scatter-dim 2``), by flag name: ``{"scatter": 2}``."""
        return {name: int(value) for name, value in (("scatter", self.scatter_dim), ("gather", self.gather_dim))
                if _is_int(value)}

    def describe_dims(self) -> str:
        """A re-layout's dims as a case is drawn: ``scatter_dim=any gather_dim=1``."""
        return f"scatter_dim={self.scatter_dim or 'any'} gather_dim={self.gather_dim or 'any'}"

    @property
    def drawn_dims(self) -> str:
        """What a case's dim (a re-layout's gather dim) is drawn from: ``"any"`` or one fixed dim."""
        if self.relayout:
            return str(self.fixed_dims.get("gather", "any"))
        return self.dims

    @property
    def fixed_dim(self) -> int | None:
        """The one dim a one-dim collective works along (``--dims N``), ``None`` for any dim or a re-layout."""
        return None if self.relayout or self.dims == "any" else int(self.dims)

    def scatter_dims(self, ndim: int, dim: int) -> list[int]:
        """A re-layout's scatter dims for ``ndim``-d inputs gathered along ``dim``: the fixed one,
        or every other dim by both names (positive first)."""
        if "scatter" in self.fixed_dims:
            return [self.fixed_dims["scatter"]]
        return [d for d in [*range(ndim), *range(-ndim, 0)] if d % ndim != dim % ndim]

    def probe_dims(self, ndim: int) -> tuple[int, int]:
        """``(gather, scatter)`` of a re-layout's probe case: the fixed dims, else dim 1 gathered
        and the first other dim from 2 on scattered (batch, sequence, heads)."""
        fixed = self.fixed_dims
        scatter_at_1 = "scatter" in fixed and fixed["scatter"] % ndim == 1
        gather = fixed.get("gather", 0 if scatter_at_1 else 1)
        scatter = self.scatter_dims(ndim, gather)
        return gather, next((d for d in scatter if d % ndim >= 2), scatter[0])

    @property
    def ndim_range(self) -> tuple[int, int] | None:
        """The dims of drawn inputs (default 1-4, a re-layout's 3-4), narrowed to inputs that have the
        fixed dims as different dims (``None``: none has)."""
        low, high = self.ndims or ((3, NDIMS[1]) if self.relayout else NDIMS)
        if self.fixed_dim is not None:  # a fixed dim needs inputs that have it: dim 2 and dim -3 need 3 dims
            low = max(low, self.fixed_dim + 1 if self.fixed_dim >= 0 else -self.fixed_dim)
            return (low, high) if low <= high else None
        if self.relayout:
            fixed = list(self.fixed_dims.values())
            fits = [n for n in range(max(low, 2), high + 1)
                    if all(-n <= d < n for d in fixed) and len({d % n for d in fixed}) == len(fixed)]
            return (fits[0], fits[-1]) if fits and fits == list(range(fits[0], fits[-1] + 1)) else None
        return low, high

    @property
    def kind(self) -> Collective:
        return COLLECTIVES.get(self.collective, COLLECTIVES["gather"])

    @property
    def read_as(self) -> Output:
        """The output convention cases are drawn for (``auto``: ``tensor``, until the probe decides)."""
        return OUTPUTS[self.kind.outputs[0] if self.output == "auto" else self.output]

    @property
    def ragged_cases(self) -> bool:
        """Whether cases may be ragged: claimed, and the output has a ragged form (a stack has none)."""
        return self.ragged and not self.read_as.stacked

    def with_(self, **changes: object) -> Contract:
        return replace(self, **changes)  # type: ignore[arg-type]

    def describe(self) -> str:
        """One short line, e.g. ``ragged dims=any grad=sum dtypes=float32,float64 output=list groups``."""
        dtypes = "all" if self.dtypes == ALL_DTYPES else ",".join(self.dtypes)
        ragged = "ragged" if self.ragged else "equal-only"
        extra = ("" if self.output == "auto" else f" output={self.output}") + (" groups" if self.groups else "")
        extra += " (2-D mesh layouts)" if self.mesh else ""
        if self.relayout:
            extra += f" scatter_dim={self.scatter_dim or 'any'} gather_dim={self.gather_dim or 'any'}"
        if self.ndims is not None:
            extra += " ndims={}-{}".format(*self.ndims)
        if self.kwargs:
            extra += " kwargs(" + ", ".join(f"{name}={value}" for name, value in self.kwargs) + ")"
        extra += " compiled" if self.compile else ""
        if self.kind.root_name:
            extra += f" {self.kind.root_name}={self.root}"
            extra += " (group rank passed)" if self.src_rank == "group" else ""
        dims = "" if self.relayout or self.kind.dimless else f" dims={self.dims}"
        shapes = "" if self.kind.dimless else f"{ragged}"
        return f"{self.collective_text()}{shapes}{dims} grad={self.grad} dtypes={dtypes}{extra}".replace("  ", " ")

    def collective_text(self) -> str:
        """``""`` for a gather (the default, said nowhere); ``reduce-scatter(sum) `` or ``all-to-all ``."""
        if self.collective == "gather":
            return ""
        return f"{self.collective}({self.op}) " if self.kind.reduces else f"{self.collective} "
