"""Comparing what a rank returned with what it should have: dtype and shape, then values, then bits.

Comparisons are vectorised; the text naming the first bad element is built only on failure.
``values`` is numeric equality (:func:`value_equal`: NaN equals NaN, -0.0 equals +0.0; a float
reduction within its bound), ``bits`` raw-byte identity (:func:`bitwise_equal`: signed zeros,
NaN payloads, the bytes of bools).

Embedded in repro scripts: imports only torch and other embedded modules, relatively.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import reference

_BITS_DTYPE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class Violation:
    """One broken property on one rank (``rank`` is ``None`` for whole-group faults)."""

    property: str
    kind: str  # "mismatch", "in-place", "exception", "hang", "crash", "desync", "wrong-answer"
    rank: int | None
    message: str

    def describe(self) -> str:
        where = "" if self.rank is None or f"on rank {self.rank}" in self.message else f" on rank {self.rank}"
        return f"[{self.property}] {self.message}{where}"


#: What a piece is compared with: a tensor, or a float reduction's value with its bound.
Expected = torch.Tensor | reference.ExpectedGrad


def exact_value(want: Expected) -> torch.Tensor:
    """The tensor a piece must equal: the reference's, or a float reduction's, rounded to its dtype."""
    return want if isinstance(want, torch.Tensor) else want.in_dtype


def _context(where: str) -> str:
    return f" ({where})" if where else ""


def check_like(what: str, got: object, expected: torch.Tensor, r: int, prop: str | None = None,
               where: str = "") -> list[Violation]:
    """dtype and shape before any value comparison, each its own property."""
    at = f"{_context(where)} on rank {r}"
    if not isinstance(got, torch.Tensor):
        return [Violation(prop or "values", "mismatch", r, f"{what} is a {type(got).__name__}, but should be a Tensor{at}")]
    if got.dtype != expected.dtype:
        return [Violation(prop or "dtype", "mismatch", r,
                          f"{what}.dtype={_dtype_text(got.dtype)}, but should be {_dtype_text(expected.dtype)}{at}")]
    if got.shape != expected.shape:
        return [Violation(prop or "shape", "mismatch", r,
                          f"{what}.shape={tuple(got.shape)}, but should be {tuple(expected.shape)}{at}")]
    return []


def _comparable(prop: str, what: str, got: torch.Tensor | None, expected: torch.Tensor, r: int,
                where: str) -> list[Violation]:
    if got is None or got.dtype != expected.dtype or got.shape != expected.shape:
        return [Violation(prop, "mismatch", r,
                          f"{what}={_summary(got)}, but should be {_summary(expected)}{_context(where)} on rank {r}")]
    return []


def check_values(prop: str, what: str, got: torch.Tensor | None, expected: Expected, r: int,
                  where: str = "") -> list[Violation]:
    """Numeric equality: NaN equals NaN, -0.0 equals +0.0, a bool is its truth value; a float
    reduction's result within its bound of the exact value."""
    want = exact_value(expected)
    problem = _comparable(prop, what, got, want, r, where)
    if problem or got is None:
        return problem
    bounded = None if isinstance(expected, torch.Tensor) else expected
    same = value_equal(got, want) if bounded is None else reference.within_bound(got, bounded)
    if bool(same.all()):
        return []
    index = first_false(same)
    bound = "" if bounded is None else f" (±{float(bounded.bound[index]):.3g})"
    return [Violation(prop, "mismatch", r,
                      f"{what}{index_text(index)}={element_text(got, index)}, but should be "
                      f"{element_text(want, index)}{bound}{_context(where)} on rank {r} "
                      f"({int((~same).sum())} of {same.numel()} elements differ)")]


def check_bits(prop: str, what: str, got: torch.Tensor | None, expected: torch.Tensor, r: int,
               where: str = "") -> list[Violation]:
    """Raw-byte identity, so NaN payloads, the sign of zero and the bytes of bools count."""
    problem = _comparable(prop, what, got, expected, r, where)
    if problem or got is None:
        return problem
    if identical(got, expected):
        return []
    same = bitwise_equal(got, expected)
    index = first_false(same)
    count = f"({int((~same).sum())} of {same.numel()} elements differ)"
    return [Violation(prop, "mismatch", r, f"{_bit_change(got, expected, index)} at {what}{index_text(index)}"
                                           f"{_context(where)} on rank {r} {count}")]


def identical(got: object, expected: torch.Tensor) -> bool:
    """Whether ``got`` is a tensor of ``expected``'s dtype and shape with the same raw bytes: what
    passes every comparison of this module at once (the common case, decided in one step)."""
    return (isinstance(got, torch.Tensor) and got.dtype == expected.dtype and got.shape == expected.shape
            and torch.equal(_raw_bytes(got), _raw_bytes(expected)))


def value_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise numeric equality of two tensors of one dtype and shape (NaN == NaN, -0 == +0)."""
    if a.dtype == torch.bool:
        return (a.view(torch.uint8) != 0) == (b.view(torch.uint8) != 0)
    if a.is_complex():
        parts_a, parts_b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
        return ((parts_a == parts_b) | (parts_a.isnan() & parts_b.isnan())).all(-1)
    if a.is_floating_point():
        return (a == b) | (a.isnan() & b.isnan())
    return a == b


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: are the raw bytes of ``a`` and ``b`` identical?"""
    return (_raw_bytes(a) == _raw_bytes(b)).all(dim=-1).reshape(a.shape)


def _bit_change(got: torch.Tensor, expected: torch.Tensor, index: tuple[int, ...]) -> str:
    """What became what at one element, in the words of its kind: a signed zero, a NaN payload, a bool byte."""
    g, w = got[index], expected[index]
    if got.dtype == torch.bool:
        return f"bool byte {_hex(g)} where {_hex(w)} should be"
    if (got.is_floating_point() or got.is_complex()) and bool(value_equal(g.reshape(1), w.reshape(1)).all()):
        parts = torch.view_as_real(w.reshape(1)) if got.is_complex() else w.reshape(1)
        if bool(parts.isnan().any()):
            return f"NaN {_hex(w)} became NaN {_hex(g)} (payload or sign lost)"
        return f"{_zero_text(w)} became {_zero_text(g)}"
    return f"{element_text(got, index)} where {element_text(expected, index)} should be"


def _zero_text(t: torch.Tensor) -> str:
    """A value with the sign of its zero(s) shown: ``-0.0``, ``+0.0``, ``(+0.0-0.0j)``."""
    def signed(x: float) -> str:
        return ("-" if torch.tensor(x).signbit() else "+") + "0.0" if x == 0 else repr(x)

    if t.is_complex():
        value = complex(t.item())
        return f"({signed(value.real)}{'' if signed(value.imag).startswith('-') else '+'}{signed(value.imag)}j)"
    return signed(float(t.item()))


def _hex(t: torch.Tensor) -> str:
    return "0x" + t.reshape(1).contiguous().view(torch.uint8).flip(0).numpy().tobytes().hex()


def _raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bytes as a (numel, itemsize) uint8 matrix, whatever its strides (copied only when
    they are not dense, or a conjugate or negative bit is still to be applied)."""
    dense = (t if t.numel() > 1 and t.is_contiguous() and not t.is_conj() and not t.is_neg()
             else t.clone(memory_format=torch.contiguous_format)).reshape(-1)  # one element: any stride
    return dense.view(torch.uint8).reshape(dense.numel(), t.element_size())


def first_false(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in (~mask).nonzero()[0])


def index_text(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def element_text(t: torch.Tensor, index: tuple[int, ...]) -> str:
    value = t[index]
    text = repr(value.item())
    if t.is_floating_point() or t.is_complex():
        bits_dtype = _BITS_DTYPE[t.element_size() // (2 if t.is_complex() else 1)]
        raw = value.reshape(1).view(bits_dtype).tolist()
        text += " (bits " + " ".join(f"0x{b & ((1 << (8 * bits_dtype.itemsize)) - 1):0{2 * bits_dtype.itemsize}x}" for b in raw) + ")"
    return text


def _summary(t: object) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    return f"Tensor({_dtype_text(t.dtype)}, shape={tuple(t.shape)})"


def _dtype_text(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")
