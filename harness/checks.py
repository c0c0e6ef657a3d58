"""The properties of BRIEF §4: compare what each rank returned with the reference.

Each property is a named check returning :class:`Violation` objects; nothing here raises,
so the CLI, the pytest plugin and the report decide what a violation means.  Comparisons
are vectorised; the text naming the first bad element is built only when a check fails.
Messages read ``<what>=<got>, but should be <expected> on rank r``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from harness import reference
from harness.case import Case, make_input
from harness.contract import DIFFERENTIABLE_DTYPES
from harness.pool import Outcome
from harness.protocol import RankResult

#: Property names, in the order they are checked and reported.
PROPERTIES: tuple[str, ...] = (
    "no-hang-no-crash",
    "dtype",
    "shape",
    "device",
    "values",
    "inputs-untouched",
    "gradients",
    "stable",
    "repeatable",
    "misuse",
)
_PHASE_PROPERTY = {"setup": "no-hang-no-crash", "forward": "values", "backward": "gradients", "repeat": "stable"}


@dataclass(frozen=True)
class Violation:
    """One broken property on one rank (``rank`` is ``None`` for whole-group faults)."""

    property: str
    kind: str  # "mismatch", "exception", "hang", "crash", "desync", "wrong-answer"
    rank: int | None
    message: str

    def describe(self) -> str:
        where = "" if self.rank is None or f"on rank {self.rank}" in self.message else f" on rank {self.rank}"
        return f"[{self.property}] {self.message}{where}"


def check_outcome(outcome: Outcome) -> list[Violation]:
    """Every in-contract property, for every rank; empty when the case passed."""
    if outcome.fault:
        return [Violation("no-hang-no-crash", outcome.fault, None, outcome.describe_fault())]
    case = outcome.case
    expected = expected_output(case)
    violations: list[Violation] = []
    for result in outcome.results:
        assert result is not None  # no fault means every rank returned
        if result.error:
            violations.append(_raised(result))
            continue
        violations += check_result(case, result, expected)
    return sorted(violations, key=lambda v: (PROPERTIES.index(v.property), v.rank if v.rank is not None else -1))


def check_result(case: Case, result: RankResult, expected: torch.Tensor) -> list[Violation]:
    """The properties of one rank that returned: output, input, gradient, stability."""
    r = result.rank
    found = (
        check_device(result, case.device)
        or _check_like("output", result.output, expected, r)
        or _check_bits("values", "output", result.output, expected, r)
    )
    found += check_input_untouched(case, result)
    if case.grad != "none" and case.dtype in DIFFERENTIABLE_DTYPES:
        found += check_gradient(case, result)
    if result.repeat_output is not None and not found:
        found += _check_bits("stable", "first output after another call", result.output_later, expected, r)
        found += _check_bits("stable", "output of a second call on other values", result.companion_output,
                             companion_output(case), r)
        found += _check_bits("repeatable", "output of the same call made again", result.repeat_output, result.output, r)
    return found


@functools.lru_cache(maxsize=32)
def expected_output(case: Case) -> torch.Tensor:
    """The reference output, cached: shrinking and replays run the same case many times."""
    return reference.expected_output(case)


@functools.lru_cache(maxsize=32)
def companion_output(case: Case) -> torch.Tensor:
    """The expected gather of the companion inputs (every bit of every input inverted)."""
    return torch.cat([make_input(case, r, companion=True) for r in range(case.world_size)], dim=case.dim)


def check_input_untouched(case: Case, result: RankResult) -> list[Violation]:
    r = result.rank
    if result.input_stride_after is not None:
        return [Violation("inputs-untouched", "mismatch", r, f"input.stride()={result.input_stride_after} changed by the call on rank {r}")]
    return _check_bits("inputs-untouched", "input after the call", result.input_after, make_input(case, r), r)


def check_gradient(case: Case, result: RankResult) -> list[Violation]:
    r = result.rank
    want = reference.expected_grad(case, r, case.grad)
    got = result.grad
    if got is None:
        return [Violation("gradients", "mismatch", r, f"grad of x=None, but should be {_contract_text(case.grad)} on rank {r}")]
    like = _check_like("grad", got, want.in_dtype, r, prop="gradients")
    if like:
        return like
    ok = reference.within_bound(got, want)
    if bool(ok.all()):
        return []
    index = _first_false(ok)
    message = (
        f"grad{_index_text(index)}={_element_text(got, index)}, but should be {_element_text(want.in_dtype, index)}"
        f" (±{float(want.bound[index]):.3g}; {_contract_text(case.grad)}) on rank {r}"
    )
    return [Violation("gradients", "mismatch", r, message)]


def check_misuse(outcome: Outcome) -> list[Violation]:
    """An out-of-contract case: every rank must raise in time, or the answer must be right."""
    if outcome.fault:
        return [Violation("misuse", outcome.fault, None, outcome.describe_fault())]
    results = [res for res in outcome.results if res is not None]
    if all(res.error for res in results):
        return []
    raised = [res.rank for res in results if res.error]
    if raised:
        return [Violation("misuse", "exception", None,
                          f"ranks {raised} raised but ranks {[res.rank for res in results if not res.error]} returned")]
    expected = expected_output(outcome.case)
    wrong = [v for res in results for v in _check_bits("values", "output", res.output, expected, res.rank)]
    return [Violation("misuse", "wrong-answer", v.rank, "silently wrong answer out of contract: " + v.message) for v in wrong[:1]]


def matching_contracts(outcome: Outcome) -> frozenset[str] | None:
    """The gradient contracts (local, sum, mean) the returned gradients match on every rank.

    ``None`` when the case says nothing about gradients (a fault, an exception, a dtype
    without gradients); an empty set when gradients came back matching none of them.
    A case can match several (at W=1 all three coincide); callers intersect over cases.
    """
    case = outcome.case
    if outcome.fault or outcome.errors or case.dtype not in DIFFERENTIABLE_DTYPES:
        return None
    results = [res for res in outcome.results if res is not None]
    if any(res.grad is None or res.grad.shape != res.input_after.shape for res in results):
        return frozenset()
    return frozenset(
        contract for contract in ("local", "sum", "mean")
        if all(bool(reference.within_bound(res.grad, reference.expected_grad(case, res.rank, contract)).all())
               for res in results)
    )


# ---------------------------------------------------------------------------------------------


def _raised(result: RankResult) -> Violation:
    last_line = (result.error or "").strip().splitlines()[-1] if result.error else ""
    prop = _PHASE_PROPERTY.get(result.error_phase or "forward", "values")
    return Violation(prop, "exception", result.rank,
                     f"rank {result.rank} raised in the {result.error_phase}: {last_line}\n{_indent(result.error or '')}")


def _check_like(what: str, got: object, expected: torch.Tensor, r: int, prop: str | None = None) -> list[Violation]:
    """dtype and shape before any value comparison, each its own property."""
    if not isinstance(got, torch.Tensor):
        return [Violation(prop or "values", "mismatch", r, f"{what} is a {type(got).__name__}, but should be a Tensor on rank {r}")]
    if got.dtype != expected.dtype:
        return [Violation(prop or "dtype", "mismatch", r, f"{what}.dtype={_dtype_text(got.dtype)}, but should be {_dtype_text(expected.dtype)} on rank {r}")]
    if got.shape != expected.shape:
        return [Violation(prop or "shape", "mismatch", r, f"{what}.shape={tuple(got.shape)}, but should be {tuple(expected.shape)} on rank {r}")]
    return []


def check_device(result: RankResult, device: str) -> list[Violation]:
    """The output lives on the input's device type (``cuda:1`` matches ``cuda``)."""
    got = (result.output_device or "").split(":")[0]
    if got != device:
        return [Violation("device", "mismatch", result.rank, f"output.device={result.output_device}, but should be {device} on rank {result.rank}")]
    return []


def _check_bits(prop: str, what: str, got: torch.Tensor, expected: torch.Tensor, r: int) -> list[Violation]:
    """Raw-byte equality, so NaN payloads and the sign of zero count."""
    if got is None or got.dtype != expected.dtype or got.shape != expected.shape:
        return [Violation(prop, "mismatch", r, f"{what}={_summary(got)}, but should be {_summary(expected)} on rank {r}")]
    if torch.equal(_raw_bytes(got), _raw_bytes(expected)):
        return []
    same = _bitwise_equal(got, expected)
    index = _first_false(same)
    return [Violation(prop, "mismatch", r,
                      f"{what}{_index_text(index)}={_element_text(got, index)}, but should be {_element_text(expected, index)} on rank {r}"
                      f" ({int((~same).sum())} of {same.numel()} elements differ)")]


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: are the raw bytes of ``a`` and ``b`` identical?"""
    return (_raw_bytes(a) == _raw_bytes(b)).all(dim=-1).reshape(a.shape)


def _raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bytes as a (numel, itemsize) uint8 matrix, whatever its strides."""
    dense = t.clone(memory_format=torch.contiguous_format).reshape(-1)
    return dense.view(torch.uint8).reshape(dense.numel(), t.element_size())


def _first_false(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in (~mask).nonzero()[0])


def _index_text(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def _element_text(t: torch.Tensor, index: tuple[int, ...]) -> str:
    value = t[index]
    text = repr(value.item())
    if t.is_floating_point() or t.is_complex():
        bits_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}[t.element_size()]
        raw = value.reshape(1).view(bits_dtype).tolist()
        text += " (bits " + " ".join(f"0x{b & ((1 << (8 * bits_dtype.itemsize)) - 1):0{2 * bits_dtype.itemsize}x}" for b in raw) + ")"
    return text


def _summary(t: object) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    return f"Tensor({_dtype_text(t.dtype)}, shape={tuple(t.shape)})"


def _dtype_text(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _contract_text(contract: str) -> str:
    return {
        "local": "contract local: C_r[slot_r]",
        "sum": "contract sum: Σ_s C_s[slot_r]",
        "mean": "contract mean: (1/W) Σ_s C_s[slot_r]",
    }.get(contract, contract)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())

