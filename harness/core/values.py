"""Values: the bits each rank holds, rebuilt from a recipe name, a rank and a seed, and laid out.

Every recipe is deterministic, so a case gives the same values on every rank, in the reference
and in a repro script; ranks differ where the dtype allows, so misordering shows.  A rank's
tensors are the recipe's values (kept for the next build: :func:`shared_values`) placed in a
layout (:func:`lay_out`); :mod:`harness.core.case` says which, for each rank of a case.
Embedded in repro scripts: it imports only torch and the standard library.
"""

from __future__ import annotations

import functools
import zlib

import torch


def make_values(recipe: str, dtype: torch.dtype, n: int, *, rank: int, seed: int) -> torch.Tensor:
    """``n`` values of ``dtype`` from ``recipe``, distinct per rank where the dtype allows."""
    if recipe == "iota":
        return _iota(n, rank, dtype)
    if recipe == "padding":
        return _padding_like(n, rank, dtype)
    if recipe == "special":
        return _special(n, rank, seed, dtype)
    if recipe == "random":
        return _random_bits(n, rank, seed, dtype)
    if recipe == "normal":
        return _finite(n, rank, seed, dtype)
    raise ValueError(f"unknown value recipe {recipe!r}")


def _generator(rank: int, seed: int, salt: str) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(zlib.crc32(f"{salt}:{seed}:{rank}".encode()))
    return g


def _exact_int_limit(dtype: torch.dtype) -> int:
    """Largest magnitude up to which every integer is exact in ``dtype`` (bounded for iota)."""
    if dtype == torch.bool:
        return 1
    if not (dtype.is_floating_point or dtype.is_complex):
        return int(torch.iinfo(dtype).max)
    mantissa = {torch.float16: 11, torch.bfloat16: 8, torch.float64: 53}.get(dtype, 24)
    return 2**mantissa


def _iota(n: int, rank: int, dtype: torch.dtype) -> torch.Tensor:
    """Distinct per element and per rank (modulo the dtype's exact range): misordering shows."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return ((i + rank) % 2).bool()
    limit = _exact_int_limit(dtype)
    if dtype == torch.uint8:
        v = (i + 1 + 37 * rank) % 256
    else:
        v = (i + 1 + 100 * rank) % min(limit, 2**31)
    if dtype.is_complex:
        real = v.to(torch.float64)
        return torch.complex(real, -real - 0.5).to(dtype)
    return v.to(dtype)


def _padding_like(n: int, rank: int, dtype: torch.dtype) -> torch.Tensor:
    """Values a careless unpadder takes for padding: 0, -1 and NaN, with a few real values."""
    i = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return torch.zeros(n, dtype=torch.bool)
    pattern = i % 4  # the same on every rank, so dropping a rank keeps the zeros in front
    if dtype.is_floating_point or dtype.is_complex:
        table = torch.tensor([0.0, -1.0, float("nan"), float(rank + 1)], dtype=torch.float64)
        v = table[pattern]
        return torch.complex(v, v.flip(0)).to(dtype) if dtype.is_complex else v.to(dtype)
    table = torch.tensor([0, -1 if dtype.is_signed else 255, 0, rank + 1], dtype=torch.int64)
    return table[pattern].to(dtype)


def _special_floats(dtype: torch.dtype) -> torch.Tensor:
    """NaNs with payloads and signs, ±inf, ±0, subnormals, extremes, the largest exact integers
    (2**p, past which not every integer is representable), as raw bits of ``dtype``."""
    base = {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)
    info = torch.finfo(base)
    largest_exact = float(_exact_int_limit(base))
    plain = torch.tensor(
        [float("inf"), float("-inf"), 0.0, -0.0, info.tiny, -info.tiny, info.max, info.min,
         info.smallest_normal / 2, largest_exact, -largest_exact, 1.0, -1.0, float("nan")],
        dtype=torch.float64,
    ).to(base)
    # NaNs with payloads built from bits: quiet NaN with low payload, negative NaN, signalling-ish.
    bits_dtype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[plain.element_size()]
    nan_bits = plain[-1:].view(bits_dtype)
    payloads = torch.cat([nan_bits | 1, nan_bits | 5, -(nan_bits.abs()) | 3]).view(base)
    smallest_subnormal = torch.tensor([1], dtype=bits_dtype).view(base)
    return torch.cat([plain, payloads, smallest_subnormal, -smallest_subnormal])


def _special(n: int, rank: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return ((torch.arange(n) + rank + seed) % 3 == 0)
    if dtype.is_floating_point or dtype.is_complex:
        table = _special_floats(dtype)
    else:
        info = torch.iinfo(dtype)
        table = torch.tensor([0, -1 if info.min < 0 else 1, info.min, info.max, 1, info.max - 1], dtype=torch.int64).to(dtype)
    idx = (torch.arange(n) * 5 + rank * 3 + seed) % len(table)
    if dtype.is_complex:
        imag_idx = (idx + 1 + rank) % len(table)
        pair = torch.stack([table[idx], table[imag_idx]], dim=-1).contiguous()
        return pair.view(dtype).reshape(n)
    return table[idx]


def _random_bits(n: int, rank: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Uniform over every bit pattern of ``dtype``: its whole range, NaN payloads included."""
    g = _generator(rank, seed, "values")
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        parts = 2 if dtype.is_complex else 1
        bits_dtype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize // parts]
        info = torch.iinfo(bits_dtype)
        raw = torch.randint(info.min, info.max, (n * parts,), generator=g, dtype=torch.int64).to(bits_dtype)
        return raw.view(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def _finite(n: int, rank: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Finite values no sum of 64 of them overflows: normals times 8 (exact in every float
    dtype only by rounding, so a reduction is judged within its bound), integers in [-50, 50]
    ([0, 50] unsigned: their sums wrap, which is how every backend adds them)."""
    g = _generator(rank, seed, "finite")
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        low = 0 if dtype == torch.uint8 else -50
        return torch.randint(low, 51, (n,), generator=g, dtype=torch.int64).to(dtype)
    real = torch.randn(n, generator=g, dtype=torch.float64) * 8
    if dtype.is_complex:
        return torch.complex(real, torch.randn(n, generator=g, dtype=torch.float64) * 8).to(dtype)
    return real.to(dtype)


def small_ints(n: int, rank: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Nonzero integers in [-4, 4], different on every rank: any sum of 8 of them is exact, and a
    gradient that misses one rank's term is always off."""
    i = torch.arange(n, dtype=torch.int64)
    real = _nonzero((i * 7 + rank * 13 + seed) % 8 - 4)
    if dtype.is_complex:
        imag = _nonzero((i * 5 + rank * 11 + seed + 3) % 8 - 4)
        return torch.complex(real.double(), imag.double()).to(dtype)
    return real.to(dtype)


def _nonzero(v: torch.Tensor) -> torch.Tensor:
    """Map -4..3 onto -4..-1, 1..4."""
    return v + (v >= 0).to(v.dtype)


def normal(n: int, rank: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    g = _generator(rank, seed, "cotangent")
    real = torch.randn(n, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        imag = torch.randn(n, generator=g, dtype=torch.float64)
        return torch.complex(real, imag).to(dtype)
    return real.to(dtype)


#: Fill for the parts of a base tensor outside the view; a value no recipe starts with.
_OUTSIDE_VIEW = 113
#: Inputs of at most this many bytes have their values kept (:func:`shared_values`).
KEPT_VALUES_BYTES = 1 << 18


def shared_values(recipe: str, dtype: torch.dtype, n: int, rank: int, seed: int) -> torch.Tensor:
    """The values of an input, never to be written to: one case rebuilds a rank's input for its
    call, for the reference on every rank of its group and for the untouched-input check, and
    a recipe costs more than a copy (a batch of small cases spent a third of a rank's time here)."""
    if n * dtype.itemsize > KEPT_VALUES_BYTES:
        return make_values(recipe, dtype, n, rank=rank, seed=seed)
    return _kept_values(recipe, dtype, n, rank, seed)


@functools.lru_cache(maxsize=64)
def _kept_values(recipe: str, dtype: torch.dtype, n: int, rank: int, seed: int) -> torch.Tensor:
    return make_values(recipe, dtype, n, rank=rank, seed=seed)


def companion_values(values: torch.Tensor, *, reduction: bool) -> torch.Tensor:
    """The companion values: every bit inverted, or for a reduction's floats the negation."""
    if values.dtype == torch.bool:
        return values.logical_not()
    if reduction and (values.is_floating_point() or values.is_complex()):
        return values.neg()
    return values.view(torch.uint8).bitwise_not().view(values.dtype)


def lay_out(values: torch.Tensor, layout: str, requires_grad: bool) -> torch.Tensor:
    """Place ``values`` (contiguous, final shape) into a new tensor with the given layout (never a
    view of ``values``, which may be kept for the next build: :func:`shared_values`)."""
    shape = tuple(values.shape)
    if not shape and layout != "contiguous":
        layout = "offset"  # a 0-d tensor has no strides to play with, only a place in its storage
    if layout == "transposed" and len(shape) >= 2:
        base = values.permute(*reversed(range(len(shape)))).clone(memory_format=torch.contiguous_format)
        return _leaf(base, requires_grad).permute(*reversed(range(len(shape))))
    if layout in ("strided", "transposed"):
        wide = shape[:-1] + (2 * shape[-1],)
        base = torch.full(wide, _OUTSIDE_VIEW, dtype=torch.int64).to(values.dtype)
        base[..., ::2] = values
        return _leaf(base, requires_grad)[..., ::2]
    if layout == "offset":
        pad = 3
        base = torch.full((values.numel() + pad,), _OUTSIDE_VIEW, dtype=torch.int64).to(values.dtype)
        base[pad:] = values.reshape(-1)
        return _leaf(base, requires_grad)[pad:].view(shape)
    return _leaf(values.clone(), requires_grad)


def _leaf(base: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    return base.requires_grad_(True) if requires_grad else base
