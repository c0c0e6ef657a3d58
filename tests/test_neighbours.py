"""Reduce-scatter and all-to-all through the same harness: the reference, the planted bugs
(``tests/planted/neighbours.py``) found and shrunk, our own implementations passing, and the
calling conventions (split sizes bound by name, a ragged claim without them refused)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from harness.reference import expected_grad, expected_output, expected_reduction, within_bound

from harness.core.binding import plan_call
from harness.core.case import Case, RankSpec, make_cotangent, make_input
from harness.core.contract import COLLECTIVES, Contract
from harness.core.errors import Misfit, UsageError
from harness.core.outputs import describe_result
from harness.ranks.targets import load
from harness.report import minimal_repro, repro
from harness.report.text import finding_message
from harness.search.engine import run_check
from harness.search.finding import Finding
from tests.budgets import PLANTED_SHRINK_BUDGET_S as SHRINK_BUDGET_S
from tests.budgets import PLANTED_TIMEOUT_S as TIMEOUT_S

pytestmark = pytest.mark.slow  # planted reduce-scatter and all-to-all bugs, each a search with shrinking

ROOT = Path(__file__).resolve().parent.parent
ROLES = {name: collective.roles for name, collective in COLLECTIVES.items()}

BUDGET = 100  # the ci profile's: the default budget finds each of these

RS = {"collective": "reduce-scatter"}
A2A = {"collective": "all-to-all"}


def rs_case(slots: tuple[int, ...], dtype: str = "float32", op: str = "sum", values: str = "iota") -> Case:
    return Case(ranks=tuple(RankSpec((n, 2), values=values, seed=3) for n in slots), dtype=dtype, grad="adjoint",
                collective="reduce-scatter", op=op)


def a2a_case(splits: tuple[tuple[int, ...], ...], dim: int = 1) -> Case:
    return Case(ranks=tuple(RankSpec((2, sum(row)), splits=row) for row in splits), dim=dim, dtype="float64",
                grad="adjoint", collective="all-to-all")


# -- the case model and the reference, in one process ------------------------------------------------


def test_a_reduce_scatter_rank_holds_every_slot_and_gets_the_sum_of_its_own() -> None:
    case = rs_case((2, 0, 3))
    inputs = [make_input(case, r) for r in range(3)]
    assert [tuple(x.shape) for x in inputs] == [(5, 2)] * 3
    total = sum(x.double() for x in inputs)
    assert torch.equal(expected_output(case, 0), total[0:2].float())
    assert expected_output(case, 1).shape == (0, 2)
    assert torch.equal(expected_output(case, 2), total[2:5].float())
    assert tuple(make_cotangent(case, 2).shape) == (3, 2)


def test_the_reduce_scatter_gradient_is_the_gather_of_the_cotangents() -> None:
    case = rs_case((2, 0, 3), op="mean")
    want = torch.cat([make_cotangent(case, r) for r in range(3)]).double() / 3
    for r in range(3):
        got = expected_grad(case, r, "adjoint")
        assert torch.allclose(got.exact.double(), want)
        assert bool(within_bound(want.float(), got).all())


def test_a_float_sum_is_judged_within_its_bound_and_integers_wrap() -> None:
    case = rs_case((4, 4, 4), values="normal")
    a, b, c = (make_input(case, r)[0:4] for r in range(3))
    expected = expected_reduction(case, 0)
    assert not isinstance(expected, torch.Tensor) and bool((expected.bound > 0).any())
    for order in ((a + b) + c, a + (b + c), (a + c) + b):  # float32, any order: all right
        assert bool(within_bound(order, expected).all())
    assert not bool(within_bound(a + b + c + 1e-3 * (a + b + c).abs().max(), expected).all())
    wrapped = expected_output(rs_case((3, 3), dtype="int8"), 0)
    inputs = [make_input(rs_case((3, 3), dtype="int8"), r)[0:3] for r in range(2)]
    assert torch.equal(wrapped, inputs[0] + inputs[1])  # int8 adds wrap, as every backend adds them


def test_an_all_to_all_rank_gets_each_sources_rows_in_source_order() -> None:
    case = a2a_case(((1, 2), (0, 3)))  # r0 sends 1 to itself, 2 to r1; r1 sends 0 to r0, 3 to itself
    x0, x1 = make_input(case, 0), make_input(case, 1)
    assert case.output_shape(0) == (2, 1) and case.output_shape(1) == (2, 5)
    assert torch.equal(expected_output(case, 1), torch.cat([x0[:, 1:3], x1[:, 0:3]], dim=1))
    grad = expected_grad(case, 0, "adjoint").exact  # rows back to where they came from
    assert torch.equal(grad, torch.cat([make_cotangent(case, 0)[:, 0:1], make_cotangent(case, 1)[:, 0:2]], dim=1))


def test_case_json_keeps_a_gathers_form_and_round_trips_the_neighbours() -> None:
    gather = Case(ranks=(RankSpec((1,)),))
    assert "collective" not in gather.to_json() and "splits" not in gather.to_json()
    for case in (rs_case((1, 2), op="max"), a2a_case(((1, 0), (2, 2)))):
        assert Case.from_json(case.to_json()) == case
    with pytest.raises(ValueError, match="splits"):
        Case(ranks=(RankSpec((3,), splits=(1, 1)), RankSpec((2,), splits=(1, 1))), collective="all-to-all")


def test_contracts_of_the_neighbours_refuse_what_has_no_meaning() -> None:
    assert Contract(**RS, op="mean").dtypes == ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
    with pytest.raises(UsageError, match="max has no gradient"):
        Contract(**RS, op="max", grad="adjoint")
    with pytest.raises(UsageError, match="--grad"):
        Contract(**A2A, grad="sum")
    with pytest.raises(UsageError, match="--op"):
        Contract(op="max")
    with pytest.raises(UsageError, match="not defined for complex64"):
        Contract(**RS, op="max", dtypes=("complex64",))


# -- on ranks: planted bugs found and shrunk, ours pass ---------------------------------------------


def search(pool, name: str, **contract: object) -> dict[str, Finding]:
    report = run_check(f"tests.planted.neighbours:{name}", Contract(**contract), max_examples=BUDGET,
                       timeout_s=TIMEOUT_S, pool=pool, shrink_budget_s=SHRINK_BUDGET_S)
    assert report.verdict == "fail", f"{name}: no counterexample in {report.examples} examples"
    return {finding.property: finding for finding in report.findings}


def slots(case: Case) -> list[int]:
    return list(case.lengths)


def splits(case: Case) -> list[tuple[int, ...]]:
    return [spec.splits for spec in case.ranks]


@pytest.mark.parametrize(("name", "contract", "prop", "minimal"), [
    ("rs_wrong_slot", RS, ("values", "shape"), lambda c: c.world_size == 2 and c.dtype == "float32" and sum(slots(c)) == 1),
    ("rs_dtype_hole", RS, "dtype", lambda c: c.world_size == 1 and c.dtype == "float64" and slots(c) == [0]),
    ("rs_local_grad", {**RS, "grad": "adjoint"}, "gradients",
     lambda c: c.world_size == 2 and c.dtype == "float32" and sum(slots(c)) == 1),
    ("a2a_reversed_sources", A2A, "values",
     lambda c: c.world_size == 2 and c.dtype == "float32" and sum(map(sum, splits(c))) <= 2),
    ("a2a_forward_grad", {**A2A, "grad": "adjoint"}, "gradients", lambda c: c.world_size == 2 and c.ndim == 1),
    ("a2a_dtype_hole", A2A, "dtype", lambda c: c.world_size == 1 and c.dtype == "bool" and splits(c) == [(0,)]),
    # sending by the receive sizes makes the sizes disagree: gloo aborts a rank (a crash)
    ("a2a_transposed_splits", A2A, "no-hang-no-crash", lambda c: 2 <= c.world_size <= 3),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_planted_bug_is_found_and_shrunk(pool, name: str, contract: dict, prop: str | tuple[str, ...],
                                           minimal) -> None:
    findings = search(pool, name, **contract)
    found = [findings[p] for p in ((prop,) if isinstance(prop, str) else prop) if p in findings]
    assert found, f"{name}: found {sorted(findings)}"
    assert minimal(found[0].case), found[0].case.describe()


@pytest.mark.parametrize(("target", "contract"), [
    ("harness.ragged:reduce_scatter_sum", {**RS, "grad": "adjoint", "groups": True}),
    ("harness.ragged:reduce_scatter_mean", {**RS, "op": "mean", "grad": "adjoint"}),
    ("harness.ragged:reduce_scatter_max", {**RS, "op": "max"}),
    ("harness.ragged:all_to_all", {**A2A, "grad": "adjoint", "groups": True}),
])
def test_our_own_reduce_scatter_and_all_to_all_pass(pool, target: str, contract: dict) -> None:
    report = run_check(target, Contract(**contract), max_examples=BUDGET, timeout_s=TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(finding) for finding in report.findings)
    assert report.examples >= BUDGET


def test_a_first_parameter_that_says_list_gets_the_pieces_of_x() -> None:
    """By annotation or by name, for a neighbour only (a gather takes one tensor); the pieces
    are split by the sizes x is cut into: a reduce-scatter's slots, an all-to-all's rows sent."""
    def by_name(input_list, dim, group=None): ...
    def by_annotation(xs: list[torch.Tensor], dim: int, group=None): ...
    def neither(x, dim, group=None): ...

    assert plan_call(by_name, roles=ROLES["reduce-scatter"]).split_input == "split_sizes"
    assert plan_call(by_annotation, roles=ROLES["all-to-all"]).split_input == "input_split_sizes"
    assert plan_call(by_name).split_input == ""  # a gather
    assert plan_call(neither, roles=ROLES["all-to-all"]).split_input == ""
    call = plan_call(by_name, roles=ROLES["all-to-all"])
    assert call.describe() == "by_name(list(x.split(input_split_sizes, dim)), dim, group=group)"
    pieces = call.invoke(lambda *args, **kwargs: args[0], torch.arange(5.0), 0,
                         sizes={"input_split_sizes": [2, 0, 3], "output_split_sizes": [1, 1, 1]})
    assert [p.tolist() for p in pieces] == [[0.0, 1.0], [], [2.0, 3.0, 4.0]]


@pytest.mark.parametrize(("target", "contract", "output"), [
    ("tests.planted.neighbours:rs_list", {**RS, "grad": "adjoint", "groups": True}, "tensor"),
    ("tests.planted.neighbours:a2a_lists", {**A2A, "grad": "adjoint", "groups": True}, "list"),
])
def test_list_forms_that_are_right_pass(pool, target: str, contract: dict, output: str) -> None:
    report = run_check(target, Contract(**contract), max_examples=BUDGET, timeout_s=TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(finding) for finding in report.findings)
    assert report.convention is not None and report.convention.output == output
    assert report.convention.call.split_input


@pytest.mark.parametrize(("name", "contract", "prop", "minimal"), [
    ("rs_list_own_piece", RS, "values", lambda c: c.world_size == 2 and sum(slots(c)) == 1),
    # a piece of one row where none should be: the pieces' shapes differ first
    ("a2a_lists_reversed", A2A, "shape", lambda c: c.world_size == 2 and sum(map(sum, splits(c))) == 1),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_planted_bug_in_a_list_form_is_found_and_shrunk(pool, name: str, contract: dict, prop: str,
                                                          minimal) -> None:
    findings = search(pool, name, **contract)
    assert prop in findings, sorted(findings)
    assert minimal(findings[prop].case), findings[prop].case.describe()


def test_a_ragged_claim_without_split_sizes_is_refused_not_judged(pool) -> None:
    from harness.search.probe import probe

    with pytest.raises(Misfit, match="takes no split_sizes parameter .* --no-ragged"):
        probe(pool, "tests.planted.neighbours:rs_equal_only", Contract(**RS), "float32", timeout_s=TIMEOUT_S)
    found = probe(pool, "tests.planted.neighbours:rs_equal_only", Contract(**RS, ragged=False), "float32",
                  timeout_s=TIMEOUT_S)
    assert found.failed is None and found.convention.call.roles == ("dim", "group")


def test_a_float_reduce_scatter_repro_judges_within_the_rounding_bound(tmp_path: Path) -> None:
    """The minimal repro of a float sum compares with the exact sum within its bound, as the
    harness does: a correct target that rounds otherwise than the reference does not reproduce,
    a wrong slot does."""
    case = rs_case((4, 4, 4), values="normal")  # W=3 float32: gloo rounds otherwise than the reference
    for target, code in (("harness.ragged:reduce_scatter_sum", 0), ("tests.planted.neighbours:rs_wrong_slot", 1)):
        finding = Finding("values", "mismatch", replace(case, grad="none"), "(planted)", [],
                          call=plan_call(load(target), roles=ROLES["reduce-scatter"]))
        path = minimal_repro.write(finding, target, tmp_path / f"{code}.py", timeout_s=10, misuse=False)
        done = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == code and "within" in path.read_text(), done.stdout + done.stderr


@pytest.mark.parametrize(("name", "case", "prop"), [
    ("rs_local_grad", rs_case((1, 0)), "gradients"),  # W=2: rank 0's slot gets rank 1's cotangent too
    ("a2a_reversed_sources", Case(ranks=(RankSpec((1,), splits=(0, 1)),) * 2, collective="all-to-all"), "values"),
    ("a2a_lists_reversed", Case(ranks=(RankSpec((1,), splits=(0, 1)),) * 2, collective="all-to-all", output="list"),
     "values"),
    ("AllToAllGroupFirstLocalGrad", Case(ranks=(RankSpec((2,), splits=(1, 1)),) * 2, grad="adjoint",
                                         collective="all-to-all"),
     "gradients"),  # the group passed first
    ("alltoallv_own_flipped", Case(ranks=(RankSpec((2,), splits=(2,)),), collective="all-to-all", output="list"),
     "values"),  # the output list allocated, filled and read
    ("a2a_with_handle_reversed", Case(ranks=(RankSpec((1,), splits=(0, 1)),) * 2, collective="all-to-all",
                                      output="first"), "values"),
])
def test_both_repro_scripts_of_a_neighbour_reproduce(name: str, case: Case, prop: str, tmp_path: Path) -> None:
    """The faithful repro (the harness's own procedure and checks, embedded) and the minimal one
    (plain torch: split sizes as literals, the reference's result as data) both exit 1."""
    target = f"tests.planted.neighbours:{name}"
    finding = Finding(prop, "mismatch", case, "(planted)", [], call=plan_call(load(target), roles=ROLES[
        case.collective]))
    faithful = repro.write(finding, target, tmp_path, timeout_s=10)
    for path in (faithful, minimal_repro.write(finding, target, faithful, timeout_s=10, misuse=False)):
        done = subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and "reproduces" in done.stdout, done.stdout + done.stderr


# -- as people write them: both dims or none, (out, handle), the group first ------------------------


def test_a_second_dim_parameter_is_refused_naming_it() -> None:
    """Both or none: a second parameter named like a dim is a Misfit naming it, never a default left
    in place nor the first one's dim given again (a re-layout called so is another call than its
    callers make); ``--kwarg`` fixing it is the user's word, and is kept."""
    def all_to_all_comm(input_, process_group=None, scatter_dim=2, gather_dim=1): ...  # ColossalAI's
    def seq_heads(x, scatter_dim=2, seq_dim=1, group=None): ...
    def gather_with_scatter_dim(x, dim, scatter_dim=0): ...

    with pytest.raises(Misfit, match=r"takes two dims, 'scatter_dim' and 'gather_dim': a re-layout .* so 'gather_dim' "
                                     r"cannot be supplied.* check it with --collective all-to-all"):
        plan_call(all_to_all_comm, roles=ROLES["reduce-scatter"])
    with pytest.raises(Misfit, match=r"--kwarg gather_dim: the harness passes 'gather_dim' itself .* --gather-dim N"):
        plan_call(all_to_all_comm, roles=ROLES["all-to-all"], kwargs=(("gather_dim", "0"),))
    with pytest.raises(Misfit, match=r"'seq_dim' names a dim the harness cannot supply \(it binds the case's dim to "
                                     r"'scatter_dim'\): seq_dim, left at its default 1,"):
        plan_call(seq_heads, roles=ROLES["all-to-all"])
    with pytest.raises(Misfit, match="'scatter_dim' names a dim .* say so with --collective"):
        plan_call(gather_with_scatter_dim)  # a gather's scatter_dim is not its dim
    fixed = plan_call(seq_heads, roles=ROLES["all-to-all"], kwargs=(("seq_dim", "0"),))
    assert fixed.describe() == "seq_heads(x, dim, seq_dim=0, group=group)"


def test_a_group_first_is_passed_first() -> None:
    """``apply(group, input, ...)``, as the Ulysses functions take their group: by position, before x."""
    from tests.planted.neighbours import AllToAllGroupFirst

    call = plan_call(AllToAllGroupFirst, roles=ROLES["all-to-all"])
    assert call.describe() == "AllToAllGroupFirst.apply(group, x, dim)"
    assert call.takes_group and not call.group_optional
    seen = call.invoke(SimpleNamespace(apply=lambda *args: args), torch.arange(4.0), 0, "the group")
    assert seen[0] == "the group" and seen[1].tolist() == [0.0, 1.0, 2.0, 3.0] and seen[2:] == (0,)
    assert type(call).from_dict(call.to_dict()) == call


def test_an_output_list_the_caller_passes_is_allocated_and_read() -> None:
    """DGL's ``alltoallv(rank, world_size, output_tensor_list, input_tensor_list)``: the
    parameters before the input bound by name, the list filled and read; torch's ``output`` first
    is refused naming it: x cannot go there."""
    from tests.planted.neighbours import alltoallv

    call = plan_call(alltoallv, roles=ROLES["all-to-all"])
    assert call.describe() == "alltoallv(rank, world_size, output_list, list(x.split(input_split_sizes, dim)))"

    def fills(output_tensor_list, input_tensor_list):
        for piece, given in zip(output_tensor_list, input_tensor_list):
            piece.copy_(given)

    got = plan_call(fills, roles=ROLES["all-to-all"]).invoke(
        fills, torch.arange(3.0), 0, sizes={"input_split_sizes": [1, 2], "output_split_sizes": [1, 2]})
    assert [t.tolist() for t in got] == [[0.0], [1.0, 2.0]]

    def all_to_all_single(output, input, output_split_sizes, input_split_sizes, group=None): ...

    with pytest.raises(Misfit, match="x would go to 'output', which names an output the caller allocates"):
        plan_call(all_to_all_single, roles=ROLES["all-to-all"])


def test_a_result_of_several_items_is_told_in_order() -> None:
    assert describe_result((torch.ones(2), None)) == "a tuple of 2 items (Tensor, NoneType)"
    assert Contract(**A2A, output="first").output == Contract(**RS, output="first").output == "first"


@pytest.mark.parametrize(("target", "contract", "described"), [
    ("tests.planted.neighbours:a2a_with_handle", {**A2A, "grad": "adjoint", "groups": True}, "first"),
    ("tests.planted.neighbours:rs_with_handle", {**RS, "grad": "adjoint"}, "first"),
    ("tests.planted.neighbours:AllToAllGroupFirst", {**A2A, "ragged": False, "grad": "adjoint"},
     "AllToAllGroupFirst.apply(group, x, dim)"),
    ("tests.planted.neighbours:alltoallv", A2A, "list"),
])
def test_forms_as_people_write_them_pass(pool, target: str, contract: dict, described: str) -> None:
    report = run_check(target, Contract(**contract, dtypes=("float32", "float64")), max_examples=BUDGET,
                       timeout_s=TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(finding) for finding in report.findings)
    assert report.convention is not None
    assert described in (report.convention.output, report.convention.call.describe())


@pytest.mark.parametrize(("name", "contract", "prop"), [
    ("a2a_with_handle_reversed", A2A, "values"),
    ("AllToAllGroupFirstLocalGrad", {**A2A, "ragged": False, "grad": "adjoint"}, "gradients"),
    ("alltoallv_own_flipped", A2A, "values"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_planted_bug_in_a_form_as_written_is_found_and_shrunk(pool, name: str, contract: dict, prop: str) -> None:
    findings = search(pool, name, **contract, dtypes=("float32", "float64"))
    assert prop in findings, sorted(findings)
    world = 1 if name == "alltoallv_own_flipped" else 2  # its own rows flipped: wrong on one rank already
    assert findings[prop].case.world_size == world, findings[prop].case.describe()


@pytest.mark.parametrize(("name", "flags", "message"), [
    ("a2a_half_bound", [], "'seq_dim' names a dim the harness cannot supply"),
    # a re-layout binds both dims or neither: one dim bound leaves the other to a guess
    ("AllToAllGroupFirst", ["--gather-dim", "1"], "takes one dim, 'dim', and --scatter-dim/--gather-dim say a re-layout"),
    ("relayout_fixed_dims", ["--gather-dim", "any"], "takes no dim, so a re-layout's dims cannot be drawn: give "
     "the two its code fixes, --scatter-dim N --gather-dim M"),
])
def test_a_half_bound_target_exits_2_naming_the_parameter(capsys: pytest.CaptureFixture[str], name: str,
                                                          flags: list[str], message: str) -> None:
    from harness.frontends import commands as cli

    status = cli.main(["check", f"tests.planted.neighbours:{name}", "--collective", "all-to-all", "--no-ragged",
                       "--world-sizes", "1-2", *flags])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err, err


def test_an_in_place_write_that_changes_the_input_is_a_violation_without_the_unchanged_note(pool) -> None:
    from harness.core.checks import IN_PLACE_NOTE

    report = run_check("tests.planted.neighbours:rs_in_place", Contract(**RS, dtypes=("float32",), world_sizes=(2, 2)),
                       max_examples=20, timeout_s=TIMEOUT_S, pool=pool)
    assert "inputs-untouched" in {finding.property for finding in report.findings}
    assert IN_PLACE_NOTE not in report.notes


def test_a_differentiable_neighbour_checked_without_gradients_is_offered_the_adjoint(pool) -> None:
    """Not a gather's sum, local or mean: a reduce-scatter's or an all-to-all's gradient contract is the adjoint."""
    import warnings

    from harness.frontends.api import GatherNote, check_gather

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check_gather("tests.planted.neighbours:AllToAllGroupFirst", collective="all-to-all", ragged=False, world_sizes=(1, 2),
                     dtypes=("float32",), max_examples=5)
    notes = [str(w.message) for w in seen if w.category is GatherNote]
    assert any("differentiable (an autograd.Function) but --grad none checks no gradient: add --grad adjoint" in note
               for note in notes), notes
    assert not any("--grad sum" in note for note in notes), notes


# -- the re-layout all-to-all (sequence parallelism: heads for sequence) ----------------------------

RELAYOUT = {**A2A, "scatter_dim": "any", "gather_dim": "any"}


def relayout_case(lengths: tuple[int, ...] = (2, 3), heads: int = 3) -> Case:
    """(batch 2, a sequence of ``lengths[r]`` on rank r, ``heads``): heads scattered as tensor_split cuts them."""
    world = len(lengths)
    splits = tuple(heads // world + (k < heads % world) for k in range(world))
    return Case(ranks=tuple(RankSpec((2, n, heads), values="iota", splits=splits) for n in lengths), dim=1,
                scatter_dim=-1, dtype="float64", grad="adjoint", collective="all-to-all")


def test_a_relayout_rank_gets_its_heads_of_every_ranks_sequence() -> None:
    case = relayout_case()
    inputs = [make_input(case, r) for r in range(2)]
    assert case.describe().startswith("all-to-all W=2 gloo/cpu float64 scatter_dim=-1 gather_dim=1 grad=adjoint")
    assert case.output_shape(0) == (2, 5, 2) and case.output_shape(1) == (2, 5, 1)
    assert torch.equal(expected_output(case, 0), torch.cat([x[..., :2] for x in inputs], dim=1))
    assert torch.equal(expected_output(case, 1), torch.cat([x[..., 2:] for x in inputs], dim=1))
    assert Case.from_json(case.to_json()) == case and "scatter_dim" not in a2a_case(((1, 1), (1, 1))).to_dict()


def test_the_relayout_adjoint_is_the_reverse_relayout() -> None:
    """Checked against autograd through a one-process model of the exchange."""
    case = relayout_case((1, 4), heads=5)
    xs = [make_input(case, r, requires_grad=True) for r in range(2)]
    total = sum((torch.cat([x.tensor_split(2, dim=-1)[r] for x in xs], dim=1) * make_cotangent(case, r)).sum()
                for r in range(2))
    for r, grad in enumerate(torch.autograd.grad(total, xs)):
        assert torch.equal(grad, expected_grad(case, r, "adjoint").exact)


def test_a_relayout_case_keeps_its_pieces_when_a_rank_leaves() -> None:
    smaller = relayout_case((2, 3, 1), heads=4).without(1)
    assert smaller is not None and [spec.splits for spec in smaller.ranks] == [(2, 1), (2, 1)]
    assert [spec.shape for spec in smaller.ranks] == [(2, 2, 3), (2, 1, 3)]
    with pytest.raises(ValueError, match="every member of a group sends each the same pieces"):
        replace(smaller, ranks=(smaller.ranks[0], replace(smaller.ranks[1], splits=(1, 2))))
    with pytest.raises(ValueError, match="other than dim=1"):
        replace(smaller, scatter_dim=1)


def test_relayout_cases_are_3_or_4_d_with_two_different_dims_heads_cut_evenly_when_equal_only() -> None:
    from hypothesis import HealthCheck, given, settings

    from harness import strategies

    seen: set[tuple[int, int, int]] = set()

    @settings(max_examples=200, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(strategies.cases(contract=Contract(**RELAYOUT, ragged=False, grad="adjoint")))
    def draw(case: Case) -> None:
        assert case.relayout and case.ndim in (3, 4) and case.split_axis != case.dim % case.ndim
        assert len({case.lengths[m] for m in case.members(0)}) <= 1  # equal sequence lengths
        assert all(len(set(spec.splits)) <= 1 for spec in case.ranks)  # heads divisible by W
        seen.add((case.ndim, case.dim, case.scatter_dim or 0))

    draw()
    assert {ndim for ndim, _, _ in seen} == {3, 4}
    assert any(dim < 0 for _, dim, _ in seen) and any(scatter < 0 for _, _, scatter in seen), seen


def test_the_relayout_flags_are_checked_against_the_contract() -> None:
    with pytest.raises(UsageError, match="a re-layout .* is an all-to-all"):
        Contract(scatter_dim="2", gather_dim="1")
    with pytest.raises(UsageError, match="no input of 3-3 dims has them as two different dims"):
        Contract(**A2A, scatter_dim="1", gather_dim="-2", ndims=(3, 3))
    with pytest.raises(UsageError, match="--gather-dim: expected any or a dim"):
        Contract(**A2A, gather_dim="7")
    assert Contract(**A2A, scatter_dim="2", gather_dim="0").ndim_range == (3, 4)
    assert Contract(**A2A, scatter_dim="-1", gather_dim="0", ndims=(2, 4)).ndim_range == (2, 4)
    assert Contract(**A2A, scatter_dim="-1", gather_dim="1", ndims=(2, 4)).ndim_range == (3, 4)  # 2-d: one dim


def test_both_dims_of_a_relayout_are_bound_by_name() -> None:
    from tests.planted.neighbours import SeqAllToAll, a2a_two_dims

    ulysses = plan_call(SeqAllToAll, roles=ROLES["all-to-all"])
    assert ulysses.takes_scatter_dim and ulysses.describe() == "SeqAllToAll.apply(group, x, scatter_dim, gather_dim)"
    colossal = plan_call(a2a_two_dims, roles=ROLES["all-to-all"])
    assert colossal.describe() == "a2a_two_dims(x, process_group=group, scatter_dim=scatter_dim, gather_dim=gather_dim)"
    seen = colossal.invoke(lambda x, process_group=None, scatter_dim=9, gather_dim=9: (scatter_dim, gather_dim),
                           torch.zeros(2, 2, 2), 1, "the group", pass_group=True, scatter_dim=-1)
    assert seen == (-1, 1)
    with pytest.raises(Misfit, match="'seq_dim' names a dim"):
        plan_call(lambda x, scatter_dim, seq_dim: x, roles=ROLES["all-to-all"])


@pytest.mark.parametrize(("target", "contract"), [
    ("harness.ragged:relayout", {**RELAYOUT, "grad": "adjoint", "groups": True}),
    ("tests.planted.neighbours:SeqAllToAll", {**RELAYOUT, "ragged": False, "grad": "adjoint"}),
    ("tests.planted.neighbours:relayout_fixed_dims", {**A2A, "ragged": False, "scatter_dim": "2", "gather_dim": "1"}),
], ids=["ours", "SeqAllToAll", "fixed-dims"])
def test_a_correct_relayout_passes(pool, target: str, contract: dict) -> None:
    report = run_check(target, Contract(**contract), max_examples=BUDGET, timeout_s=TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(finding) for finding in report.findings)
    assert report.examples >= BUDGET


def test_a_relayout_whose_backward_repeats_the_forward_is_found_at_two_ranks(pool) -> None:
    """The Ulysses backward that does not swap the dims back: right at W=1, where nothing moves."""
    findings = search(pool, "SeqAllToAllUnswappedGrad", **A2A, ragged=False, grad="adjoint")
    assert "gradients" in findings, sorted(findings)
    assert findings["gradients"].case.world_size == 2 and findings["gradients"].case.relayout


def test_a_relayout_by_reshape_mixes_batch_and_sequence_and_is_found_with_a_batch_of_two(pool) -> None:
    findings = search(pool, "relayout_by_reshape", **A2A, ragged=False, scatter_dim="2", gather_dim="1", ndims=(4, 4))
    case = findings["values"].case
    assert case.world_size == 2 and case.ranks[0].shape[0] == 2, case.describe()


class _DeepSpeedNewer(torch.autograd.Function):
    """DeepSpeed's later ``_SeqAllToAll`` signature (``batch_dim_idx`` and stream/handle parameters)."""

    @staticmethod
    def forward(ctx, group, input, scatter_idx, gather_idx, batch_dim_idx, stream=None, handle=None, type=None,
                is_fwd=True): ...


class _Yunchang(torch.autograd.Function):
    """yunchang's ``SeqAllToAll4D`` signature with its ``use_sync`` flag."""

    @staticmethod
    def forward(ctx, group, input, scatter_idx, gather_idx, use_sync=False): ...


def test_the_seven_published_signatures_are_called_as_written() -> None:
    """The issue's seven forms, by signature: each is planned without a wrapper; the two with
    DeepSpeed's ``batch_dim_idx`` (where the batch dim sits, which no case varies) take it as a
    fixed argument, and are refused without it, naming it."""
    from harness.variants.relayouts import DeepSpeedSeqAllToAll, colossalai_all_to_all

    def single_all_to_all(input, scatter_idx, gather_idx, group): ...  # DeepSpeed, before batch_dim_idx
    def single_all_to_all_newer(input, scatter_idx, gather_idx, batch_dim_idx, group, async_op=False, handle=None,
                                type=None): ...
    def all_to_all(x, output_split_sizes, input_split_sizes, group, async_op=False): ...  # megablocks
    from tests.planted.neighbours import alltoallv  # DGL's

    roles = ROLES["all-to-all"]
    as_written = {
        "DeepSpeed _SeqAllToAll": plan_call(DeepSpeedSeqAllToAll, roles=roles),
        "DeepSpeed _SeqAllToAll (batch_dim_idx)": plan_call(_DeepSpeedNewer, roles=roles,
                                                            kwargs=(("batch_dim_idx", "0"),)),
        "DeepSpeed single_all_to_all": plan_call(single_all_to_all, roles=roles),
        "DeepSpeed single_all_to_all (batch_dim_idx)": plan_call(single_all_to_all_newer, roles=roles,
                                                                 kwargs=(("batch_dim_idx", "0"),)),
        "yunchang SeqAllToAll4D": plan_call(_Yunchang, roles=roles),
        "ColossalAI all_to_all_comm": plan_call(colossalai_all_to_all, roles=roles),
        "megablocks all_to_all": plan_call(all_to_all, roles=roles),
        "DGL alltoallv": plan_call(alltoallv, roles=roles),
    }
    relayouts = [name for name, call in as_written.items() if call.takes_scatter_dim]
    assert len(relayouts) == 6 and "yunchang SeqAllToAll4D" in relayouts
    assert as_written["yunchang SeqAllToAll4D"].describe() == "_Yunchang.apply(group, x, scatter_dim, gather_dim)"
    assert as_written["DeepSpeed single_all_to_all (batch_dim_idx)"].describe() == (
        "single_all_to_all_newer(x, scatter_idx=scatter_dim, gather_idx=gather_dim, batch_dim_idx=0, group=group)")
    with pytest.raises(Misfit, match="needs 'batch_dim_idx'"):
        plan_call(_DeepSpeedNewer, roles=roles)


def test_a_dtype_not_drawn_is_explained_in_the_words_of_the_collective_checked() -> None:
    from harness.pool.capabilities import Capabilities

    caps = Capabilities("gloo", "cpu", "2.13", {("int16", "all_gather"): "no", ("int16", "all_to_all_single"): "no",
                                                ("bool", "all_gather"): "no", ("bool", "reduce_scatter_tensor"): "ok"})
    assert caps.refusal(("int16",)) == "gloo cannot all_gather it"
    assert caps.refusal(("int16",), "all-to-all") == ("gloo cannot all_gather it nor all_to_all_single it, so no "
                                                      "all-to-all of it is checked")
    assert caps.refusal(("int16", "bool"), "reduce-scatter") == ("gloo cannot all_gather them, so no reduce-scatter "
                                                                 "of them is checked")
