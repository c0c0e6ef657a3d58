"""What a gather variant promises: the contract the harness holds it to.

A contract is plain data so that the CLI, the pytest plugin, the catalogue and the
strategies all describe a variant the same way (BRIEF §2).  Ranks never need it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

#: Every dtype name the harness knows; which of them a backend really supports is measured
#: (``harness.capabilities``), never assumed.
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
GRAD_CONTRACTS: tuple[str, ...] = ("none", "local", "sum", "mean")
BACKENDS: tuple[str, ...] = ("gloo", "nccl")
DEVICES: tuple[str, ...] = ("cpu", "cuda")


class UsageError(ValueError):
    """A bad argument from a user: the message names the argument, the value and the fix."""


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
    if not 1 <= lo <= hi:
        raise UsageError(f"--world-sizes: need 1 <= A <= B, got {text!r}")
    return lo, hi


@dataclass(frozen=True)
class Contract:
    """The calling contract of a ``gather(x, dim)`` variant.

    - ``ragged``: ranks may hold different lengths along ``dim``; equal-only variants are
      probed with ragged input only under ``--probe-misuse``.
    - ``dims``: ``"0"`` (gather along dim 0 only) or ``"any"`` (any dim, negative included).
    - ``dtypes``: the dtype names the variant claims to handle.
    - ``grad``: the gradient contract of BRIEF §3.
    """

    ragged: bool = True
    dims: str = "any"
    dtypes: tuple[str, ...] = ALL_DTYPES
    grad: str = "none"
    backends: tuple[str, ...] = ("gloo",)
    devices: tuple[str, ...] = ("cpu",)
    world_sizes: tuple[int, int] = field(default=(1, 4))

    def __post_init__(self) -> None:
        if self.dims not in ("0", "any"):
            raise UsageError(f"--dims: expected 0 or any, got {self.dims!r}")
        if self.grad not in GRAD_CONTRACTS:
            raise UsageError(f"--grad: expected one of {', '.join(GRAD_CONTRACTS)}, got {self.grad!r}")
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
        if not 1 <= lo <= hi <= 8:
            raise UsageError(f"--world-sizes: need 1 <= A <= B <= 8, got {lo}-{hi}")

    def with_(self, **changes: object) -> Contract:
        return replace(self, **changes)  # type: ignore[arg-type]

    def describe(self) -> str:
        """One short line, e.g. ``ragged dims=any grad=sum dtypes=float32,float64``."""
        dtypes = "all" if self.dtypes == ALL_DTYPES else ",".join(self.dtypes)
        ragged = "ragged" if self.ragged else "equal-only"
        return f"{ragged} dims={self.dims} grad={self.grad} dtypes={dtypes}"
