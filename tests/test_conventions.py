"""Calling conventions: any gather as it is written, a misfit told in seconds, subgroups.

- :func:`plan_call` reads how to call a target from its signature (a table of signatures);
  :func:`detect_output` reads how its result reads (a table of results).
- Each convention has a correct target that passes (the README's ``examples/``) and a buggy
  one that is caught, without glue.
- Every misfit (signature, return type, a class that is not an autograd.Function, an
  attribute that is not callable, ``--groups`` without a group parameter) is exit 2 with one
  line, in under 10 s; an exception inside the target's own code on the probe case is a
  finding (exit 1), reported without a minute of shrinking.
- ``--groups``: the Lightning lineage's global-rank-on-subgroup bug is found with a minimal
  case whose group rank differs from its global rank; a target that ignores its group is a
  fault, never a wrong verdict; out-of-group ranks stay idle.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from harness import cli
from harness.case import Case, RankSpec
from harness.checks import check_result
from harness.contract import Contract
from harness.conventions import Call, Misfit, detect_output, plan_call, read
from harness.procedure import RankResult
from harness.search import run_check
from tests import planted_conventions

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "tests.planted_conventions"
BUDGET = 60
MISFIT_LIMIT_S = 10.0


# -- planning the call ---------------------------------------------------------------------------


def f_x(x): ...
def f_x_dim(x, dim): ...
def f_x_d(x, d): ...
def f_x_kw_dim(x, *, dim=0): ...
def f_x_gather_dim_group(x, gather_dim, group): ...
def f_x_group(x, group=None): ...
def f_x_sizes(x, sizes=None): ...
def f_args(*args): ...


class WithCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim): ...


class WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x, dim, group): ...

    @staticmethod
    def setup_context(ctx, inputs, output): ...


class Module(torch.nn.Module):
    def forward(self, x, sizes=None): ...


PLANS = [
    (f_x, Call(dim="")),
    (f_x_dim, Call(dim="positional")),
    (f_x_d, Call(dim="positional")),
    (f_x_kw_dim, Call(dim="dim")),
    (f_x_gather_dim_group, Call(dim="positional", group="group", group_required=True)),
    (f_x_group, Call(dim="", group="group")),
    (f_x_sizes, Call(dim="")),
    (f_args, Call(dim="positional")),
    (WithCtx, Call(dim="positional", apply=True)),
    (WithSetupContext, Call(dim="positional", group="positional", group_required=True, apply=True)),
    (Module(), Call(dim="", module=True)),
]


@pytest.mark.parametrize("target, expected", PLANS, ids=[str(getattr(t, "__name__", type(t).__name__)) for t, _ in PLANS])
def test_the_call_is_read_from_the_signature(target: object, expected: Call) -> None:
    planned = plan_call(target)
    assert (planned.dim, planned.group, planned.group_required, planned.apply, planned.module) == (
        expected.dim, expected.group, expected.group_required, expected.apply, expected.module)


@pytest.mark.parametrize("target, needs_group, message", [
    (planted_conventions.needs_extra_argument, False, "needs 'world_size'"),
    (planted_conventions.NotAFunction, False, "is a class, not an autograd.Function"),
    (42, False, "not a callable gather"),
    (f_x_dim, True, "takes no group argument, but --groups passes group="),
], ids=["extra argument", "class", "not callable", "no group parameter"])
def test_a_signature_no_convention_fits_is_a_misfit(target: object, needs_group: bool, message: str) -> None:
    with pytest.raises(Misfit, match=message):
        plan_call(target, needs_group=needs_group)


# -- reading the result ----------------------------------------------------------------------------

X = torch.arange(2.0)
READINGS = [
    (torch.arange(4.0), "tensor"),
    (torch.arange(4.0).view(2, 2), "stack"),
    ([X, X], "list"),
    ((X, X), "list"),
    ((torch.arange(4.0), torch.tensor([2, 2])), "first"),
    ((torch.arange(4.0), None), "first"),
    (torch.arange(3.0), "tensor"),  # a wrong shape is a finding, not a misfit
]


@pytest.mark.parametrize("result, output", READINGS, ids=[f"{output}-{i}" for i, (_, output) in enumerate(READINGS)])
def test_the_output_convention_is_read_from_the_result(result: object, output: str) -> None:
    assert detect_output(result, X, world=2, dim=0) == output


@pytest.mark.parametrize("result", [{"gathered": X}, None, 3, "text", [1, 2]], ids=["dict", "None", "int", "str", "ints"])
def test_a_result_no_convention_reads_is_a_misfit(result: object) -> None:
    with pytest.raises(Misfit, match="no convention reads it"):
        detect_output(result, X, world=2, dim=0)


def test_gradients_flow_through_the_concatenation_of_a_list() -> None:
    pieces = [torch.ones(2, 3, requires_grad=True), torch.ones(1, 3, requires_grad=True)]
    reading = read(pieces, "list", world=2, dim=0)
    assert reading.flowing.shape == (3, 3) and reading.pieces == pieces
    reading.flowing.backward(torch.arange(9.0).view(3, 3))
    assert pieces[1].grad is not None and pieces[1].grad.tolist() == [[6.0, 7.0, 8.0]]


# -- every convention, as written ----------------------------------------------------------------

CORRECT = [
    ("examples/gather_layer.py:GatherLayer", Contract(ragged=False, grad="local"), "list"),
    ("examples/stacked.py:all_gather", Contract(output="stack"), "stack"),
    ("examples/with_sizes.py:gather_with_sizes", Contract(grad="sum"), "first"),
    ("examples/x_only.py:concat_all_gather", Contract(ragged=False), "tensor"),
    ("examples/with_group.py:gather", Contract(grad="sum", groups=True), "tensor"),
]


@pytest.mark.parametrize("target, contract, output", CORRECT, ids=[c[2] + "-" + c[0].split(":")[1] for c in CORRECT])
def test_a_correct_gather_in_each_convention_passes(pool, target: str, contract: Contract, output: str) -> None:
    report = run_check(str(ROOT / target), contract, max_examples=BUDGET, timeout=5.0, pool=pool)
    assert report.convention is not None and report.convention.output == output
    assert report.verdict == "pass", "\n\n".join(f.message for f in report.findings)


BUGGY = [
    ("ReversedGatherLayer", Contract(ragged=False, grad="local"), "values", "list"),
    ("unstacked_on_one_rank", Contract(output="stack"), "shape", "stack"),
    ("sizes_right_data_short", Contract(), "shape", "first"),
    ("aliased_buffers", Contract(ragged=False), "values", "tensor"),
]


@pytest.mark.parametrize("name, contract, prop, output", BUGGY, ids=[b[3] + "-" + b[0] for b in BUGGY])
def test_a_buggy_gather_in_each_convention_is_caught(pool, name: str, contract: Contract, prop: str,
                                                       output: str) -> None:
    report = run_check(f"{PLANTED}:{name}", contract, max_examples=BUDGET, timeout=5.0, pool=pool,
                       shrink_budget_s=20.0)
    assert report.convention is not None and report.convention.output == output
    assert prop in [f.property for f in report.findings], [f.message for f in report.findings]


def test_a_stack_that_is_missing_at_one_rank_shrinks_to_one_rank(pool) -> None:
    report = run_check(f"{PLANTED}:unstacked_on_one_rank", Contract(output="stack"), max_examples=BUDGET,
                       timeout=5.0, pool=pool, shrink_budget_s=20.0)
    [finding] = report.findings
    assert finding.case.world_size == 1 and finding.case.output == "stack", finding.message


# -- subgroups ---------------------------------------------------------------------------------------


def group_rank_differs(case: Case) -> bool:
    return any(case.members(r).index(r) != r for group in case.groups for r in group)


def test_the_global_rank_on_a_subgroup_bug_is_found(pool) -> None:
    report = run_check(f"{PLANTED}:global_rank_on_subgroup", Contract(ragged=False, grad="sum", groups=True),
                       max_examples=150, timeout=5.0, pool=pool, shrink_budget_s=20.0)
    assert report.convention is not None and report.convention.describe() == "f(x, group=) -> stack (detected)"
    [finding] = [f for f in report.findings if f.property == "gradients"]
    assert group_rank_differs(finding.case), finding.message
    assert finding.case.groups, finding.message


def test_without_groups_the_global_rank_bug_hides(pool) -> None:
    report = run_check(f"{PLANTED}:global_rank_on_subgroup", Contract(ragged=False, grad="sum"),
                       max_examples=40, timeout=5.0, pool=pool)
    assert report.verdict == "pass", [f.message for f in report.findings]


def test_a_target_that_ignores_its_group_is_a_fault_not_a_wrong_verdict(pool) -> None:
    report = run_check(f"{PLANTED}:ignores_group", Contract(groups=True), max_examples=BUDGET, timeout=3.0,
                       pool=pool, shrink_budget_s=15.0)
    assert report.findings, "gathering over the world instead of the group went unnoticed"
    for finding in report.findings:  # wrong values with disjoint groups; a desync when some rank is idle
        assert len(finding.case.groups) > 1 or any(finding.case.idle(r) for r in range(finding.case.world_size))
        assert finding.property in ("values", "shape", "no-hang-no-crash"), finding.message
        assert finding.kind != "hang", finding.message  # the idle rank's ledger proves it at once


def test_idle_ranks_never_call_the_target_and_pass(pool) -> None:
    case = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((3,))), groups=((0, 2),))
    outcome = pool.run(case, "examples.with_group:gather", call=Call(dim="positional", group="group"))
    assert outcome.fault is None, outcome.describe_fault()
    idle = outcome.results[1]
    assert idle is not None and idle.idle and idle.output is None and idle.collectives == []
    members = [res for res in outcome.results if res is not None and not res.idle]
    assert [tuple(res.output[0].shape) for res in members if res.output] == [(5,), (5,)]


# -- the device index ---------------------------------------------------------------------------------


def test_an_output_on_another_ranks_gpu_is_a_device_violation() -> None:
    case = Case(ranks=(RankSpec((1,)), RankSpec((1,))), device="cuda")
    expected = torch.cat([torch.tensor([1.0]), torch.tensor([101.0])])
    result = RankResult(rank=1, device="cuda:1", output=[expected], output_devices=["cuda:0"],
                        input_after=torch.tensor([101.0]))
    [violation] = check_result(case, result)
    assert (violation.property, violation.message) == (
        "device", "output.device=cuda:0, but should be cuda:1 on rank 1")


# -- misfits and failures on the probe, through the command line --------------------------------------

MISFITS = [
    (["needs_extra_argument"], "needs 'world_size', which the harness cannot supply"),
    (["returns_dict"], "returned a dict; no convention reads it"),
    (["per_rank_list", "--output", "tensor"], "which --output tensor does not read; --output list would fit"),
    (["NotAFunction"], "NotAFunction is a class, not an autograd.Function"),
    (["NOT_CALLABLE"], "'NOT_CALLABLE' is of type int, not a callable gather"),
    (["no_group", "--groups"], "takes no group argument, but --groups passes group="),
]


@pytest.mark.parametrize("args, message", MISFITS, ids=[m[0][0] + (" " + " ".join(m[0][1:]) if m[0][1:] else "")
                                                         for m in MISFITS])
def test_a_misfit_is_exit_2_with_one_line_in_seconds(pool, capsys: pytest.CaptureFixture[str], args: list[str],
                                                     message: str) -> None:
    started = time.monotonic()
    status = cli.main(["check", f"{ROOT}/tests/planted_conventions.py:{args[0]}", *args[1:]])
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    assert (status, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert elapsed < MISFIT_LIMIT_S


def test_an_exception_inside_the_target_on_the_probe_case_is_a_shrunk_finding(
        pool, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It fails on the probe's own case (W=2, 3 elements per rank), and is shrunk from there."""
    started = time.monotonic()
    status = cli.main(["check", f"{ROOT}/tests/planted_conventions.py:name_error_at_two_ranks", "--repro-dir",
                       str(tmp_path), "--quiet"])
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert status == 1 and elapsed < MISFIT_LIMIT_S, out
    assert "FAIL: 1 property violated (values) in " in out
    assert "NameError: name 'undefined_helper' is not defined" in out
    assert "case: W=2 gloo/cpu float32 dim=0 grad=none | r0 (0,) iota | r1 (0,) iota" in out, out
    assert "found first by the calling-convention probe's own case" in out
