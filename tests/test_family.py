"""The family through the same harness (all-reduce, split, copy, broadcast, scatter, reduce, gather to
one rank): the reference in one process, the contract's refusals, the planted bugs of
``tests.planted.family.py`` found and shrunk, correct ones passing, and the call as published code
makes it (in place, the reduction by name, funcol's ``self`` parameter, a root by global or group rank)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from harness.reference import expected_grad, expected_output, expected_pieces, within_bound

from harness.core.binding import plan_call
from harness.core.case import Case, RankSpec, input_values
from harness.core.checks import UNCOUNTED_WRITE
from harness.core.contract import COLLECTIVES, Contract
from harness.core.errors import Misfit, UsageError
from harness.core.outputs import settle
from harness.ragged import scatter as harness_scatter
from harness.ranks.targets import load
from harness.report import minimal_repro, repro
from harness.report.text import finding_message
from harness.search.engine import run_check
from harness.search.finding import Finding
from harness.search.probe import probe
from tests.budgets import PLANTED_SHRINK_BUDGET_S as SHRINK_BUDGET_S
from tests.budgets import PLANTED_TIMEOUT_S as TIMEOUT_S

ROOT = Path(__file__).resolve().parent.parent
AR = {"collective": "all-reduce"}
BUDGET = 100  # the ci profile's


def ar_case(world: int = 2, op: str = "sum", dtype: str = "float64", grad: str = "sum") -> Case:
    return Case(ranks=tuple(RankSpec((2, 3), values="normal", seed=5) for _ in range(world)), dtype=dtype,
                grad=grad, collective="all-reduce", op=op)


# -- the case model and the reference, in one process ------------------------------------------------


@pytest.mark.parametrize(("op", "combine"), [("sum", torch.sum), ("mean", torch.mean),
                                             ("max", lambda t, dim: t.amax(dim)), ("min", lambda t, dim: t.amin(dim))])
def test_every_rank_gets_the_reduction_of_every_members_input(op: str, combine) -> None:
    from harness.core.case import input_values

    case = ar_case(3, op=op, grad="none")
    stacked = torch.stack([input_values(case, r) for r in range(3)])
    for rank in range(3):
        got = expected_output(case, rank)
        assert got.shape == (2, 3)
        torch.testing.assert_close(got, combine(stacked, 0))


@pytest.mark.parametrize(("contract", "senders", "divisor"), [("identity", "own", 1), ("sum", "all", 1),
                                                              ("mean", "all", 3)])
def test_the_gradient_contracts_are_the_own_cotangent_their_sum_and_their_mean(contract, senders, divisor) -> None:
    from harness.core.case import make_cotangent

    case = ar_case(3, grad=contract)
    for rank in range(3):
        terms = [make_cotangent(case, rank)] if senders == "own" else [make_cotangent(case, r) for r in range(3)]
        want = sum(t.to(torch.float64) for t in terms) / divisor
        got = expected_grad(case, rank, contract)
        assert bool(within_bound(want, got).all())


@pytest.mark.parametrize(("op", "combine"), [
    ("product", lambda a, b: a * b), ("band", torch.bitwise_and), ("bor", torch.bitwise_or),
    ("bxor", torch.bitwise_xor)])
def test_an_integer_product_wraps_and_the_bitwise_reductions_are_exact(op: str, combine) -> None:
    case = ar_case(world=3, op=op, dtype="int8", grad="none")
    inputs = [input_values(case, r) for r in range(3)]
    want = combine(combine(inputs[0], inputs[1]), inputs[2])  # int8 arithmetic: a product wraps
    assert all(torch.equal(expected_pieces(case, r)[0], want) for r in range(3))


def test_a_product_or_bitwise_reduction_is_refused_where_it_has_no_meaning() -> None:
    with pytest.raises(UsageError, match="--op product --grad sum: a product has no gradient contract"):
        Contract(collective="all-reduce", op="product", grad="sum", dtypes=("int64",))
    with pytest.raises(UsageError, match="product is not defined for float32"):
        Contract(collective="all-reduce", op="product", dtypes=("float32",))
    with pytest.raises(UsageError, match="NCCL has no bitwise reduction"):
        Contract(collective="all-reduce", op="bxor", backends=("nccl",), devices=("cuda",))
    assert Contract(collective="reduce", op="band").dtypes == ("uint8", "int8", "int16", "int32", "int64")


def test_an_all_reduce_contract_refuses_what_has_no_meaning_naming_what_fits() -> None:
    with pytest.raises(UsageError, match="takes no dim"):
        Contract(**AR, dims="1")
    with pytest.raises(UsageError, match="all-reduce's name for that gradient is --grad identity"):
        Contract(**AR, grad="local")
    with pytest.raises(UsageError, match="a min has no gradient contract"):
        Contract(**AR, op="min", grad="sum")
    assert Contract(**AR, op="avg").op == "mean"  # torch's name
    assert Contract(**AR).describe().startswith("all-reduce(sum) grad=none")
    with pytest.raises(ValueError, match="in a all-reduce every member holds one shape"):
        Case(ranks=(RankSpec((2,)), RankSpec((3,))), collective="all-reduce")


def test_the_reduction_is_bound_by_name_as_a_reduce_op_or_as_funcols_string() -> None:
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    import torch.distributed.nn.functional as nn_functional

    assert plan_call(dist.all_reduce, roles=("op",)).describe() == "all_reduce(x, op=op, group=group)"
    assert plan_call(nn_functional.all_reduce, roles=("op",)).keywords[0] == ("op", "op")
    funcols = plan_call(funcol.all_reduce, roles=("op",))  # its x is named self: a function, not a method
    assert ("reduceOp", "op_name") in funcols.positional + funcols.keywords


class _Handle:
    """A work handle's one method, counting its calls."""

    def __init__(self) -> None:
        self.waits = 0

    def wait(self) -> bool:
        self.waits += 1
        return True


def test_c10d_gather_and_scatter_are_called_as_written_with_their_lists_at_the_root_alone() -> None:
    """``dist.gather(tensor, gather_list, dst)``: x first, the list to fill by name; ``dist.scatter(tensor,
    scatter_list, src)``: the output slot first, x's pieces next (None off the source)."""
    gather = plan_call(dist.gather, roles=COLLECTIVES["gather-to"].roles)
    assert gather.describe() == "gather(x, gather_list=gather_list, dst=dst, group=group)"
    scatter = plan_call(dist.scatter, roles=COLLECTIVES["scatter"].roles)
    assert scatter.describe() == ("scatter(output_slot, list(x.split(split_sizes, dim)) if rank == src else None, "
                                  "src=src, group=group)")
    assert scatter.x_at_source and scatter.leading == (("tensor", "output_slot"),)
    assert not plan_call(harness_scatter, roles=COLLECTIVES["scatter"].roles).x_at_source  # (x, dim, split_sizes)


def test_a_result_with_its_work_handle_is_read_once_the_handle_is_waited_on() -> None:
    """``async_op=True``: ``(out, handle)`` keeps its structure, a lone handle reads as None (the
    result is in x); each handle is waited on once; a tensor (funcol's async tensors) is no handle."""
    out, handle = torch.ones(2), _Handle()
    assert settle((out, handle)) == ((out, handle), [handle]) and handle.waits == 1
    assert settle(handle) == (None, [handle]) and handle.waits == 2
    assert settle(out) == (out, []) and settle(None) == (None, [])


# -- on ranks ------------------------------------------------------------------------------------------


def search(pool, name: str, **contract: object):
    contract = {**AR, **contract}
    report = run_check(f"tests.planted.family:{name}", Contract(**contract), max_examples=BUDGET,
                       timeout_s=TIMEOUT_S, pool=pool, shrink_budget_s=SHRINK_BUDGET_S)
    assert report.verdict == "fail", f"{name}: no counterexample in {report.examples} examples"
    return {finding.property: finding for finding in report.findings}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "contract", "prop", "world"), [
    ("identity_backward", {"grad": "sum"}, "gradients", 2),  # identity where sum is claimed
    ("double_counted_backward", {"grad": "sum"}, "gradients", 1),  # sum counted twice
    ("identity_backward", {"grad": "sum", "groups": True}, "gradients", 2),
    ("mean_without_division", {"op": "mean", "grad": "mean"}, "values", 2),  # avg without its 1/W
    ("global_rank_in_group", {"groups": True}, "values", 2),  # the global rank in a subgroup
    ("in_place_forgets_a_dense_copy", {}, "values", 2),
    ("async_forgets_a_dense_copy", {}, "values", 2),  # async_op=True: found once its handle is waited on
    ("bitwise_or_as_xor", {"op": "bor"}, "values", 2),  # one reduction for another, told by name
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_planted_all_reduce_bug_is_found_and_shrunk_to_its_smallest_world(pool, name, contract, prop,
                                                                            world) -> None:
    findings = search(pool, name, **contract)
    assert prop in findings, f"{name}: found {sorted(findings)}"
    assert findings[prop].case.world_size == world, findings[prop].case.describe()


SPLIT = {"collective": "split"}
COPY = {"collective": "copy"}
BCAST = {"collective": "broadcast"}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "contract", "prop", "world"), [
    ("split_backward_not_gathering", {**SPLIT, "grad": "adjoint"}, "gradients", 2),
    ("split_by_global_rank", {**SPLIT, "groups": True}, ("values", "shape"), 2),  # the other slot's length
    ("copy_without_all_reduce", {**COPY, "grad": "sum"}, "gradients", 2),
    ("copy_summing_twice", {**COPY, "grad": "sum"}, "gradients", 2),
    ("broadcast_backward_not_reduced", {**BCAST, "grad": "sum"}, "gradients", 2),
    ("broadcast_backward_everywhere", {**BCAST, "grad": "sum"}, "gradients", 2),
    ("broadcast_source_by_group_rank", {**BCAST, "grad": "sum", "groups": True}, "gradients", 2),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_planted_split_or_copy_bug_is_found_and_shrunk_to_its_smallest_world(pool, name, contract, prop,
                                                                              world) -> None:
    findings = search(pool, name, **contract)
    found = [findings[p] for p in ((prop,) if isinstance(prop, str) else prop) if p in findings]
    assert found, f"{name}: found {sorted(findings)}"
    assert found[0].case.world_size == world, found[0].case.describe()


def test_a_broadcast_gives_the_sources_x_and_its_gradient_to_the_source_alone() -> None:
    from harness.core.case import input_values, make_cotangent

    case = Case(ranks=tuple(RankSpec((2,), values="normal", seed=4) for _ in range(4)), collective="broadcast",
                grad="sum", root=1, groups=((0, 2), (1, 3)))
    assert torch.equal(expected_output(case, 0), input_values(case, 2))  # group {0,2}: its rank 1 is global 2
    assert torch.equal(expected_output(case, 1), input_values(case, 3))
    summed = make_cotangent(case, 0).double() + make_cotangent(case, 2).double()
    assert bool(within_bound(summed, expected_grad(case, 2, "sum")).all())
    assert bool(within_bound(torch.zeros(2, dtype=torch.float64), expected_grad(case, 0, "sum")).all())
    with pytest.raises(ValueError, match="root=2"):
        Case(ranks=(RankSpec((2,)),) * 2, collective="broadcast", root=2)
    with pytest.raises(UsageError, match="--world-sizes 3-4"):
        Contract(collective="broadcast", src=2, world_sizes=(1, 4))


SCATTER = {"collective": "scatter", "grad": "adjoint"}
REDUCE = {"collective": "reduce", "grad": "adjoint"}
GATHER_TO = {"collective": "gather-to", "grad": "adjoint"}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "contract", "prop", "world"), [
    ("reduce_backward_own", REDUCE, "gradients", 2),  # each rank's own cotangent, not the destination's
    ("reduce_backward_all_reduced", REDUCE, "gradients", 2),  # an all-reduce's backward
    ("reduce_mean_without_division", {"collective": "reduce", "op": "mean"}, "values", 2),
    ("gather_to_backward_own_slot", GATHER_TO, "gradients", 2),  # a gather's local contract
    ("scatter_backward_not_gathering", SCATTER, "gradients", 2),
    ("scatter_backward_everywhere", SCATTER, "gradients", 2),
    ("scatter_source_by_group_rank", {**SCATTER, "groups": True}, "gradients", 2),  # the global rank in a subgroup
    ("gather_list_reversed", {"collective": "gather-to", "groups": True, "dtypes": ("int64", "float32")}, "values",
     2),  # dist.gather as written
    ("scatter_list_rotated", {"collective": "scatter", "ragged": False, "groups": True}, "values", 2),  # dist.scatter's
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_planted_rooted_bug_is_found_and_shrunk_to_its_smallest_world(pool, name, contract, prop, world) -> None:
    findings = search(pool, name, **contract)
    assert prop in findings, f"{name}: found {sorted(findings)}"
    assert findings[prop].case.world_size == world, findings[prop].case.describe()


def test_a_scatter_gives_each_rank_its_slot_of_the_sources_x_and_the_source_the_gathered_cotangents() -> None:
    from harness.core.case import input_values, make_cotangent

    case = Case(ranks=(RankSpec((1, 2), values="normal", seed=1), RankSpec((2, 2), values="normal", seed=2)),
                collective="scatter", grad="adjoint", root=1)
    source = input_values(case, 1)  # every member holds every slot: (3, 2)
    assert source.shape == (3, 2) and not torch.equal(input_values(case, 0), source)
    assert torch.equal(expected_output(case, 0), source[:1]) and torch.equal(expected_output(case, 1), source[1:])
    gathered = torch.cat([make_cotangent(case, 0), make_cotangent(case, 1)]).double()
    assert bool(within_bound(gathered, expected_grad(case, 1, "adjoint")).all())
    assert bool(within_bound(torch.zeros(3, 2, dtype=torch.float64), expected_grad(case, 0, "adjoint")).all())


def test_a_reduce_or_gather_to_one_rank_judges_the_destination_alone_and_sends_back_its_cotangent() -> None:
    from harness.core.case import input_values, make_cotangent

    reduce = Case(ranks=(RankSpec((2,), values="normal", seed=3),) * 3, collective="reduce", grad="adjoint", root=1,
                  op="mean")
    assert [reduce.judged(r) for r in range(3)] == [False, True, False]
    torch.testing.assert_close(expected_output(reduce, 1), sum(input_values(reduce, r) for r in range(3)) / 3)
    for rank in range(3):  # the destination's cotangent over W, on every rank
        want = make_cotangent(reduce, 1).double() / 3
        assert bool(within_bound(want, expected_grad(reduce, rank, "adjoint")).all())
    gather = Case(ranks=(RankSpec((1,), seed=1), RankSpec((2,), seed=2), RankSpec((3,), seed=3)),
                  collective="gather-to", grad="adjoint", root=1, groups=((0, 2),))
    assert [gather.judged(r) for r in range(3)] == [False, False, True]  # rank 1 idle; group rank 1 is global 2
    assert bool(within_bound(make_cotangent(gather, 2)[:1].double(), expected_grad(gather, 0, "adjoint")).all())
    assert bool(within_bound(make_cotangent(gather, 2)[1:].double(), expected_grad(gather, 2, "adjoint")).all())


@pytest.mark.slow
@pytest.mark.parametrize(("name", "code"), [("async_forgets_a_dense_copy", 1), ("async_in_place", 0)])
def test_both_repros_of_an_async_all_reduce_wait_on_its_handle(name: str, code: int, tmp_path: Path) -> None:
    """Each repro reads the result once the handle is waited on, as the ranks did: the dropped write-back
    reproduces on a non-dense x, the correct twin (a future that writes back) does not."""
    case = Case(ranks=(RankSpec((2, 3), values="normal", seed=1, layout="transposed"),) * 2, collective="all-reduce")
    target = f"tests.planted.family:{name}"
    call = replace(plan_call(load(target), roles=COLLECTIVES["all-reduce"].roles), waits=True)
    finding = Finding("values", "mismatch", case, "(planted)", [], call=call)
    faithful = repro.write(finding, target, tmp_path, timeout_s=10)
    for path in (faithful, minimal_repro.write(finding, target, faithful, timeout_s=10, misuse=False)):
        done = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == code, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("name", "op", "code"), [("reduce_mean_without_division", "mean", 1),
                                                 ("reduce_others_anything", "sum", 0)])
def test_both_repros_of_a_reduce_judge_the_destination_alone(name: str, op: str, code: int, tmp_path: Path) -> None:
    """A wrong destination reproduces; 42s on the other rank do not (its result is not judged there either)."""
    case = Case(ranks=(RankSpec((2,), values="normal", seed=1),) * 2, collective="reduce", op=op)
    target = f"tests.planted.family:{name}"
    finding = Finding("values", "mismatch", case, "(planted)", [],
                      call=plan_call(load(target), roles=COLLECTIVES["reduce"].roles))
    faithful = repro.write(finding, target, tmp_path, timeout_s=10)
    for path in (faithful, minimal_repro.write(finding, target, faithful, timeout_s=10, misuse=False)):
        done = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == code, done.stdout + done.stderr


def test_a_split_or_copy_rank_gets_its_slot_of_the_one_x_every_member_holds() -> None:
    from harness.core.case import input_values

    split = Case(ranks=(RankSpec((1, 2), values="normal", seed=1), RankSpec((2, 2), values="normal", seed=1)),
                 collective="split", grad="adjoint")
    assert torch.equal(input_values(split, 0), input_values(split, 1))  # replicated: rank 0's values
    torch.testing.assert_close(expected_output(split, 1), input_values(split, 0)[1:])
    copy = Case(ranks=(RankSpec((3,), values="normal", seed=1),) * 2, collective="copy", grad="sum")
    torch.testing.assert_close(expected_output(copy, 1), input_values(copy, 0))


@pytest.mark.slow
def test_sum_where_identity_is_claimed_is_found(pool) -> None:
    findings = search(pool, "double_counted_backward", grad="identity")
    assert "gradients" in findings


@pytest.mark.slow
@pytest.mark.parametrize(("target", "contract"), [
    ("harness.ragged:all_reduce_sum", {"grad": "sum", "groups": True}),
    ("harness.ragged:all_reduce_mean", {"op": "mean", "grad": "mean"}),
    ("harness.ragged:all_reduce_identity", {"grad": "identity"}),
    ("harness.ragged:all_reduce_min", {"op": "min"}),
    ("harness.ragged:all_reduce", {"op": "product", "groups": True}),  # integers: wrapping
    ("harness.ragged:all_reduce", {"op": "bxor"}),
    ("tests.planted.family:bitwise_or_as_xor", {"op": "band"}),  # right for every reduction but bor
    ("tests.planted.family:in_place_dense", {"groups": True}),
    ("tests.planted.family:async_pair", {"groups": True}),  # (out, handle): read once waited on
    ("tests.planted.family:async_in_place", {"groups": True}),  # a handle alone, or a future
    ("tests.planted.family:funcol_style", {"op": "avg", "grad": "mean"}),
    ("tests.planted.family:identity_backward", {"grad": "identity"}),
    ("tests.planted.family:mean_divided_first", {"op": "mean", "grad": "mean"}),  # the other order of a mean
    ("harness.ragged:split", {**SPLIT, "grad": "adjoint", "groups": True}),
    ("harness.ragged:copy_to_region", {**COPY, "grad": "sum", "groups": True}),
    ("harness.ragged:broadcast", {**BCAST, "grad": "sum", "groups": True}),
    ("harness.ragged:broadcast", {**BCAST, "grad": "sum", "src": 2, "world_sizes": (3, 4)}),
    # (no complex: gloo's broadcast raises on it in torch 2.4.1)
    ("torch.distributed._functional_collectives:broadcast", {**BCAST, "src_rank": "group", "groups": True,
                                                              "dtypes": ("int64", "float16", "float32", "float64")}),
    ("harness.ragged:scatter", {**SCATTER, "groups": True, "src": 1, "world_sizes": (2, 4)}),
    ("harness.ragged:reduce", {**REDUCE, "op": "mean", "groups": True}),
    ("harness.ragged:gather_to", {**GATHER_TO, "dst": 1, "world_sizes": (2, 3)}),
    ("tests.planted.family:reduce_others_anything", {**REDUCE, "groups": True}),  # the others are not judged
    # c10d's as written: the destination's gather_list filled (None elsewhere); the output slot first, the pieces
    # at the source alone; each made dense first, as gloo needs (torch 2.4.1's gather and every scatter read a
    # view's storage); complex raises in gloo's gather
    ("tests.planted.family:gather_list_dense", {"collective": "gather-to", "groups": True, "dst": 1,
                                                "world_sizes": (2, 3), "dtypes": ("bool", "int64", "float32")}),
    ("tests.planted.family:scatter_dense", {"collective": "scatter", "ragged": False, "groups": True, "src": 1,
                                            "world_sizes": (2, 4)}),
])
def test_correct_ones_pass(pool, target: str, contract: dict) -> None:
    report = run_check(target, Contract(**{**AR, **contract}), max_examples=BUDGET, timeout_s=TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(finding) for finding in report.findings)
    assert report.examples >= BUDGET


@pytest.mark.slow
def test_a_write_into_the_callers_tensor_is_told_with_what_it_does_to_gradients(pool) -> None:
    findings = search(pool, "ReduceFromRegion", grad="identity", dtypes=("float32",))
    assert "inputs-untouched" in findings
    assert UNCOUNTED_WRITE in findings["inputs-untouched"].message


@pytest.mark.slow
@pytest.mark.parametrize(("target", "error", "words"), [
    ("harness.ragged:all_reduce_sum", UsageError, "--collective all-reduce"),
    ("tests.planted.family:in_place", Misfit, "--collective all-reduce"),
])
def test_an_all_reduce_checked_as_a_gather_is_exit_2_naming_the_collective(pool, target, error, words) -> None:
    with pytest.raises(error, match=words):
        probe(pool, target, Contract(world_sizes=(1, 2)), "float32", timeout_s=TIMEOUT_S)
