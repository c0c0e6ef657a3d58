"""The reference: expected outputs and gradients on hand-computed examples, and the tolerance."""

from __future__ import annotations

import pytest
import torch
from harness.reference import ExpectedGrad, expected_grad, expected_output, within_bound
from harness.strategies import cases
from hypothesis import HealthCheck, given, settings

from harness.core.case import Case, RankSpec, make_cotangent, make_input, torch_dtype
from harness.core.contract import DTYPE_GROUPS, Contract


def _ints_case(lengths: tuple[int, ...], dtype: str = "float32") -> Case:
    """1-d ranks of the given lengths, iota inputs, ``ints`` cotangents, seed 0."""
    return Case(ranks=tuple(RankSpec((n,)) for n in lengths), dtype=dtype, grad="sum")


# ---------------------------------------------------------------------------------------------
# expected output


def test_expected_output_is_the_concatenation_in_rank_order() -> None:
    # iota gives rank r the values 1 + 100·r, 2 + 100·r, ...
    assert torch.equal(expected_output(_ints_case((2, 0, 1))), torch.tensor([1.0, 2.0, 201.0]))


def test_expected_output_along_a_negative_dim_of_non_contiguous_ranks() -> None:
    case = Case(
        ranks=(RankSpec((2, 1), layout="transposed"), RankSpec((2, 2), layout="offset")),
        dim=-1,
        dtype="int16",
    )
    want = torch.tensor([[1, 101, 102], [2, 103, 104]], dtype=torch.int16)
    got = expected_output(case)
    assert got.dtype == torch.int16 and torch.equal(got, want)


def test_expected_output_keeps_dtype_and_empty_shapes() -> None:
    case = Case(ranks=(RankSpec((0, 3)), RankSpec((0, 3))), dtype="complex64")
    got = expected_output(case)
    assert got.dtype == torch.complex64 and got.shape == (0, 3)


# ---------------------------------------------------------------------------------------------
# expected gradients on a hand example: W = 3, lengths (1, 2, 1), asymmetric cotangents


def _hand_grad(case: Case, rank: int, contract: str) -> list[float]:
    """Σ over the senders of C_s[slot_rank], by hand on Python lists (W = 1 slot per element)."""
    cotangents = [make_cotangent(case, s).tolist() for s in range(case.world_size)]
    start = sum(case.lengths[:rank])
    slot = range(start, start + case.lengths[rank])
    if contract == "local":
        return [cotangents[rank][i] for i in slot]
    sums = [sum(c[i] for c in cotangents) for i in slot]
    return sums if contract == "sum" else [v / case.world_size for v in sums]


def test_hand_example_has_asymmetric_cotangents() -> None:
    cotangents = [make_cotangent(_ints_case((1, 2, 1)), s) for s in range(3)]
    assert not torch.equal(cotangents[0], cotangents[1]) and not torch.equal(cotangents[1], cotangents[2])


@pytest.mark.parametrize("contract", ["local", "sum", "mean"])
@pytest.mark.parametrize("rank", [0, 1, 2])
def test_expected_grad_matches_the_hand_computation(contract: str, rank: int) -> None:
    case = _ints_case((1, 2, 1))
    got = expected_grad(case, rank, contract)
    want = torch.tensor(_hand_grad(case, rank, contract), dtype=torch.float64)
    assert got.exact.dtype == torch.float64 and got.exact.shape == (case.lengths[rank],)
    assert torch.allclose(got.exact, want, rtol=1e-15, atol=0)
    assert got.in_dtype.dtype == torch.float32 and torch.equal(got.in_dtype, want.float())


def test_local_sum_and_mean_differ_with_asymmetric_cotangents() -> None:
    grads = [expected_grad(_ints_case((1, 2, 1)), 1, c).exact for c in ("local", "sum", "mean")]
    assert not torch.equal(grads[0], grads[1]) and not torch.equal(grads[1], grads[2])


def test_ints_cotangents_make_sum_and_local_exact() -> None:
    case = _ints_case((1, 2, 1), dtype="bfloat16")
    for contract in ("local", "sum"):
        assert torch.count_nonzero(expected_grad(case, 1, contract).bound) == 0
    # mean divides by W = 3, which rounds: the float rule applies; by W = 4 it is exact.
    assert torch.all(expected_grad(case, 1, "mean").bound > 0)
    assert torch.count_nonzero(expected_grad(_ints_case((1, 2, 1, 0)), 1, "mean").bound) == 0


def test_complex_gradients_bound_each_part() -> None:
    ranks = (RankSpec((1, 2), cotangent="floats"), RankSpec((2, 2)), RankSpec((1, 2), cotangent="floats", seed=3))
    case = Case(ranks=ranks, dtype="complex64", grad="sum")
    got = expected_grad(case, 1, "sum")
    assert got.exact.dtype == torch.complex128 and got.bound.dtype == torch.float64
    assert got.bound.shape == got.exact.shape == (2, 2) and torch.all(got.bound > 0)
    cotangents = torch.stack([make_cotangent(case, s)[1:3] for s in range(3)])
    assert torch.all(within_bound(cotangents.sum(0), got))
    # An error in the imaginary part alone is caught.
    assert not torch.any(within_bound(got.in_dtype + 1e-3j, got))


# ---------------------------------------------------------------------------------------------
# the tolerance


def test_float16_sum_in_any_order_is_within_a_nonzero_bound() -> None:
    ranks = tuple(RankSpec((64,), cotangent="floats", seed=s) for s in range(8))
    case = Case(ranks=ranks, dtype="float16", grad="sum")
    want = expected_grad(case, 5, "sum")
    assert torch.all(want.bound > 0)
    slots = [make_cotangent(case, s)[5 * 64 : 6 * 64] for s in range(8)]
    forward, backward, pairwise = slots[0].clone(), slots[-1].clone(), slots
    for c in slots[1:]:
        forward += c  # float16 accumulation, rank order
    for c in reversed(slots[:-1]):
        backward += c  # the other order
    while len(pairwise) > 1:  # a tree, as ring and tree reductions do
        pairwise = [a + b for a, b in zip(pairwise[::2], pairwise[1::2])]
    for got in (forward, backward, pairwise[0]):
        assert got.dtype == torch.float16 and torch.all(within_bound(got, want))
    # The orders really differ, and neither a local-only nor a mean gradient passes as the sum.
    assert not torch.equal(forward, backward)
    assert not torch.all(within_bound(slots[5], want))
    assert not torch.all(within_bound(forward / 8, want))


def test_a_mean_adjoint_that_rounds_into_the_subnormals_is_judged_within_a_bound() -> None:
    """Dividing by W=4 is exact for float16 except where the quotient lands between subnormals:
    the case a fuzz run of our reduce_scatter_mean was failed on (its gradient bit-identical to
    the correctly rounded one), where C/4 rounded in float16 must pass and two subnormals more must not."""
    cotangent = "ints", "floats"
    ranks = tuple(RankSpec((204 if r == 1 else 0, 4), seed=195, cotangent=cotangent[r == 1]) for r in range(4))
    case = Case(ranks=ranks, dtype="float16", grad="adjoint", collective="reduce-scatter", op="mean")
    want = expected_grad(case, 0, "adjoint")
    got = torch.cat([make_cotangent(case, r) for r in range(4)]) / 4  # float16, correctly rounded
    rounds = (got.double() != want.exact) & (want.exact.abs() < torch.finfo(torch.float16).tiny)
    assert rounds.any()  # the rule is exercised: some quotients fall between subnormals
    assert torch.all(within_bound(got, want))
    up = torch.tensor(1.0, dtype=torch.float16)
    off = got.clone()
    off[rounds] = torch.nextafter(torch.nextafter(got[rounds], up), up)  # two subnormals on: > ½ ulp off
    assert not within_bound(off, want)[rounds].any()


def test_within_bound_rejects_nan_and_takes_equal_values() -> None:
    exact = torch.tensor([1.0, float("inf"), float("nan"), 2.0], dtype=torch.float64)
    want = ExpectedGrad(exact=exact, bound=torch.zeros(4, dtype=torch.float64), in_dtype=exact.float())
    got = torch.tensor([1.0, float("inf"), float("nan"), float("nan")])
    assert within_bound(got, want).tolist() == [True, True, True, False]
    with pytest.raises(ValueError, match="got.shape=\\(3,\\), but should be \\(4,\\)"):
        within_bound(got[:3], want)


@pytest.mark.parametrize(
    "case, contract, message",
    [
        (_ints_case((1,)), "none", "contract='none' has no expected gradient"),
        (_ints_case((1,), dtype="int64"), "sum", "dtype='int64' has no gradients"),
        (_ints_case((1,)), "sum-ish", "contract='sum-ish'"),
    ],
    ids=["grad none", "int dtype", "unknown contract"],
)
def test_expected_grad_refuses(case: Case, contract: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expected_grad(case, 0, contract)


FLOATING = DTYPE_GROUPS["float"] + DTYPE_GROUPS["complex"]


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(contract=Contract(grad="sum", dtypes=FLOATING), max_elements=600))
def test_autograd_sum_and_mean_of_the_gathered_graph_are_within_bound(case: Case) -> None:
    """A single-process gather: backward of cat(x_0..x_{W-1}) once per rank's cotangent.

    Autograd accumulates the W contributions in the dtype, in rank order: one of the
    summation orders the bound must cover.
    """
    dtype = torch_dtype(case.dtype)
    xs = [torch.zeros(spec.shape, dtype=dtype, requires_grad=True) for spec in case.ranks]
    for s in range(case.world_size):
        torch.cat(xs, dim=case.dim).backward(make_cotangent(case, s))
    for r, x in enumerate(xs):
        assert x.grad is not None and x.grad.dtype == dtype
        assert torch.all(within_bound(x.grad, expected_grad(case, r, "sum")))
        assert torch.all(within_bound(x.grad / case.world_size, expected_grad(case, r, "mean")))


# ---------------------------------------------------------------------------------------------
# inputs rebuilt from kept values


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "offset"])
@pytest.mark.parametrize("shape", [(3, 4), (1, 5), (5, 1), (4,), ()])
def test_a_target_writing_into_its_input_does_not_change_the_next_build(layout: str, shape: tuple[int, ...]) -> None:
    """The values of recent inputs are kept (a case rebuilds one input several times): every build
    is a new tensor, so a target that writes into its input, or a leaf made to require grad, cannot
    reach the kept values, the reference or the untouched-input check (a size-1 dim makes a
    permuted copy look contiguous: ``contiguous()`` would hand back the kept tensor itself)."""
    case = Case(ranks=(RankSpec(shape, layout=layout), RankSpec(shape)), dtype="float32",
                output="stack" if not shape else "tensor")
    want, reference = make_input(case, 0).clone(), expected_output(case)
    first = make_input(case, 0, requires_grad=True)
    with torch.no_grad():
        first.mul_(-3).add_(7)
    again = make_input(case, 0)
    assert torch.equal(again, want) and not again.requires_grad and again.data_ptr() != first.data_ptr()
    assert torch.equal(expected_output(case), reference)
