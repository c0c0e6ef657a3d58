"""Calling conventions: any gather called as its authors' callers call it, a misfit told in seconds, subgroups.

- :func:`plan_call` binds arguments by name from the signature (a table of signatures: the
  exact calls made, an optional group both ways, rank and world size, fixed arguments) and
  names what it cannot supply (a table of published gathers whose second parameter is no
  dim); :func:`detect_output` reads how its result reads (a table of results).
- Called as written: Lightning's ``AllGatherGrad.apply(x, group)`` arity bug is found (and
  its repro makes that call), the fixed version passes both ways; ``rank``/``world_size``
  are those of the group passed; ``--kwarg sync_grads=True`` reaches every call and is echoed.
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

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from harness.core.binding import plan_call
from harness.core.case import Case, RankSpec
from harness.core.checks import check_result
from harness.core.contract import Contract
from harness.core.conventions import Call
from harness.core.errors import Misfit, UsageError
from harness.core.outputs import detect_output, read
from harness.core.procedure import RankResult
from harness.frontends import commands as cli
from harness.report import repro
from harness.report.text import finding_message
from harness.search.engine import run_check
from harness.search.results import Progress
from tests.budgets import CASE_TIMEOUT_S, SCRIPT_TIMEOUT_S
from tests.planted import conventions as planted_conventions

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "tests.planted.conventions"
BUDGET = 60
MISFIT_LIMIT_S = 10.0


# -- planning the call ---------------------------------------------------------------------------


def f_x(x): ...
def f_x_dim(x, dim): ...
def f_x_axis(x, axis=0): ...
def f_x_kw_dim(x, *, dim=0): ...
def f_x_dim_positional_only(x, dim, /): ...
def f_x_gather_dim_group(x, gather_dim, group): ...
def f_x_group(x, group=None): ...
def f_x_sizes(x, sizes=None): ...
def f_args(*args): ...
def f_args_kwargs(*args, **kwargs): ...
def gather_features(features, world_size): ...
def all_gather_features(features, rank, world_size): ...
def gather_replicas(x, *, num_replicas, group_rank): ...
def all_gather_ddp_if_available(tensor, group=None, sync_grads=False): ...
def takes_kwargs(x, dim, **options): ...


class WithCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim): ...


class WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x, dim, group): ...

    @staticmethod
    def setup_context(ctx, inputs, output): ...


class RankAndSize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, rank, world_size): ...


class GroupBeforeSwitch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group=None, sync_grads=False): ...


class SwitchBeforeDim(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, flag=False, dim=0): ...


class Module(torch.nn.Module):
    def forward(self, x, sizes=None): ...


SYNC = (("sync_grads", "True"),)
#: target, fixed arguments -> every call the harness makes (an optional group both ways).
PLANS = [
    (f_x, (), ("f_x(x)",)),
    (f_x_dim, (), ("f_x_dim(x, dim)",)),
    (f_x_axis, (), ("f_x_axis(x, dim)",)),
    (f_x_kw_dim, (), ("f_x_kw_dim(x, dim=dim)",)),
    (f_x_dim_positional_only, (), ("f_x_dim_positional_only(x, dim)",)),
    (f_x_gather_dim_group, (), ("f_x_gather_dim_group(x, dim, group=group)",)),
    (f_x_group, (), ("f_x_group(x, group=group)", "f_x_group(x)")),
    (f_x_sizes, (), ("f_x_sizes(x)",)),
    (f_args, (), ("f_args(x, dim)",)),
    (f_args_kwargs, SYNC, ("f_args_kwargs(x, dim, sync_grads=True)",)),
    (gather_features, (), ("gather_features(x, world_size=world_size)",)),
    (all_gather_features, (), ("all_gather_features(x, rank=rank, world_size=world_size)",)),
    (gather_replicas, (), ("gather_replicas(x, num_replicas=world_size, group_rank=rank)",)),
    (all_gather_ddp_if_available, SYNC, ("all_gather_ddp_if_available(x, group=group, sync_grads=True)",
                                         "all_gather_ddp_if_available(x, sync_grads=True)")),
    (takes_kwargs, (("bucket", "'a b'"),), ("takes_kwargs(x, dim, bucket='a b')",)),
    (planted_conventions.AllGatherGrad, (), ("AllGatherGrad.apply(x, group)", "AllGatherGrad.apply(x)")),
    (WithCtx, (), ("WithCtx.apply(x, dim)",)),
    (WithSetupContext, (), ("WithSetupContext.apply(x, dim, group)",)),
    (RankAndSize, (), ("RankAndSize.apply(x, rank, world_size)",)),
    (GroupBeforeSwitch, SYNC, ("GroupBeforeSwitch.apply(x, group, True)",)),  # the group cannot be left out
    (Module(), (), ("Module(x)",)),
]


@pytest.mark.parametrize("target, kwargs, forms", PLANS,
                         ids=[str(getattr(t, "__name__", type(t).__name__)) for t, _, _ in PLANS])
def test_the_call_is_read_from_the_signature_by_name(target: object, kwargs: tuple[tuple[str, str], ...],
                                                      forms: tuple[str, ...]) -> None:
    planned = plan_call(target, kwargs=kwargs)
    assert planned.forms(groups=False) == forms
    assert planned.inferred == (("dim",) if target in (f_args, f_args_kwargs) else ())
    assert Call(**json.loads(json.dumps(planned.to_dict()))) == planned  # travels to ranks and repro scripts


def test_with_groups_an_optional_group_is_always_passed() -> None:
    assert plan_call(planted_conventions.AllGatherGrad, needs_group=True).forms(groups=True) == (
        "AllGatherGrad.apply(x, group)",)


P = planted_conventions
#: target, fixed arguments, --groups -> what the one-line misfit must say.
MISFIT_PLANS = [
    (P.CLIP4ClipAllGather, (), False, "CLIP4ClipAllGather.apply(tensor, args) needs 'args'"),
    (P.gather_from_model_parallel_region, (), False, "needs 'natoms'"),
    (P.gather_features, (), False, "needs 'text_features', which the harness cannot supply: it passes x as "
                                   "'image_features'"),
    (P.VlkitAllGather, (), False, "needs 'tensor', which the harness cannot supply: it passes x as 'tensor_list'"),
    (P.all_gather_anchor_positive_pairs, (), False, "'positives' is annotated torch.Tensor: no literal is a tensor"),
    (P.all_gather, (), False, "give it with --kwarg labels=LITERAL"),
    (P.NotAFunction, (), False, "is a class, not an autograd.Function"),
    (42, (), False, "not a callable gather"),
    (f_x_dim, (), True, "takes no group parameter (named group, process_group, pg), but --groups passes one"),
    (f_args, (), True, "names no group parameter, but --groups passes one by name"),
    (f_x_dim, (("sizes", "None"),), False, "--kwarg sizes: f_x_dim(x, dim) takes no parameter 'sizes'"),
    (f_x_dim, (("dim", "0"),), False, "--kwarg dim: the harness passes 'dim' itself in f_x_dim(x, dim) (the gather "
                                      "dim of each case; --dims N checks dim N only)"),
    (f_x_group, (("group", "None"),), False, "--kwarg group: the harness passes 'group' itself"),
    (all_gather_features, (("rank", "0"),), False, "--kwarg rank: the harness passes 'rank' itself"),
    (gather_features, (("world_size", "2"),), False, "--kwarg world_size: the harness passes 'world_size' itself"),
    (f_x_dim, (("x", "1"),), False, "--kwarg x: 'x' is the parameter x goes to"),
    (f_args, SYNC, False, "--kwarg sync_grads: f_args(*args) takes no parameter 'sync_grads' by name"),
    (SwitchBeforeDim, (), False, ".apply passes arguments by position only, so passing 'dim' means passing 'flag' "
                                 "before it; give it with --kwarg flag=False"),
]


@pytest.mark.parametrize("target, kwargs, needs_group, message", MISFIT_PLANS,
                         ids=[f"{getattr(t, '__name__', t)}{kw or ''}{' --groups' if g else ''}"
                              for t, kw, g, _ in MISFIT_PLANS])
def test_a_signature_no_convention_fits_is_a_misfit(target: object, kwargs: tuple[tuple[str, str], ...],
                                                    needs_group: bool, message: str) -> None:
    with pytest.raises(Misfit) as raised:
        plan_call(target, needs_group=needs_group, kwargs=kwargs)
    assert message in str(raised.value) and "\n" not in str(raised.value)


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


@pytest.mark.parametrize("result", [{"gathered": X}, 3, "text", [1, 2]], ids=["dict", "int", "str", "ints"])
def test_a_result_no_convention_reads_is_a_misfit(result: object) -> None:
    with pytest.raises(Misfit, match="no convention reads it"):
        detect_output(result, X, world=2, dim=0)


def test_a_gather_returning_none_is_told_it_may_be_an_in_place_all_reduce() -> None:
    with pytest.raises(Misfit, match=r"returned None \(or a work handle alone\): .* --collective all-reduce"):
        detect_output(None, X, world=2, dim=0)


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
    report = run_check(str(ROOT / target), contract, max_examples=BUDGET, timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.convention is not None and report.convention.output == output
    assert report.verdict == "pass", "\n\n".join(f.message for f in report.findings)


BUGGY = [
    ("ReversedGatherLayer", Contract(ragged=False, grad="local"), "values", "list"),
    ("unstacked_on_one_rank", Contract(output="stack"), "shape", "stack"),
    ("sizes_right_data_short", Contract(), "shape", "first"),
    ("aliased_buffers", Contract(ragged=False), "values", "tensor"),
]


@pytest.mark.parametrize("name, contract, prop, output", BUGGY, ids=[b[3] + "-" + b[0] for b in BUGGY])
@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_a_buggy_gather_in_each_convention_is_caught(pool, name: str, contract: Contract, prop: str,
                                                       output: str) -> None:
    report = run_check(f"{PLANTED}:{name}", contract, max_examples=BUDGET, timeout_s=CASE_TIMEOUT_S, pool=pool,
                       shrink_budget_s=20.0)
    assert report.convention is not None and report.convention.output == output
    assert prop in [f.property for f in report.findings], "\n\n".join(finding_message(f) for f in report.findings)


@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_a_stack_that_is_missing_at_one_rank_shrinks_to_one_rank(pool) -> None:
    report = run_check(f"{PLANTED}:unstacked_on_one_rank", Contract(output="stack"), max_examples=BUDGET,
                       timeout_s=CASE_TIMEOUT_S, pool=pool, shrink_budget_s=20.0)
    [finding] = report.findings
    assert finding.case.world_size == 1 and finding.case.output == "stack", finding.message


# -- subgroups ---------------------------------------------------------------------------------------


def group_rank_differs(case: Case) -> bool:
    return any(case.members(r).index(r) != r for group in case.groups for r in group)


@pytest.mark.slow
def test_the_global_rank_on_a_subgroup_bug_is_found(pool) -> None:
    report = run_check(f"{PLANTED}:global_rank_on_subgroup", Contract(ragged=False, grad="sum", groups=True),
                       max_examples=150, timeout_s=CASE_TIMEOUT_S, pool=pool, shrink_budget_s=20.0)
    assert report.convention is not None
    assert report.convention.describe() == "global_rank_on_subgroup(x, group=group) -> stack (detected)"
    [finding] = [f for f in report.findings if f.property == "gradients"]
    assert group_rank_differs(finding.case), finding.message
    assert finding.case.groups, finding.message


def test_without_groups_the_global_rank_bug_hides(pool) -> None:
    report = run_check(f"{PLANTED}:global_rank_on_subgroup", Contract(ragged=False, grad="sum"),
                       max_examples=40, timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)


@pytest.mark.slow
def test_a_target_that_ignores_its_group_is_a_fault_not_a_wrong_verdict(pool) -> None:
    report = run_check(f"{PLANTED}:ignores_group", Contract(groups=True), max_examples=BUDGET, timeout_s=3.0,
                       pool=pool, shrink_budget_s=15.0)
    assert report.findings, "gathering over the world instead of the group went unnoticed"
    for finding in report.findings:  # wrong values with disjoint groups; a desync when some rank is idle
        assert len(finding.case.groups) > 1 or any(finding.case.idle(r) for r in range(finding.case.world_size))
        assert finding.property in ("values", "shape", "no-hang-no-crash"), finding.message
        assert finding.kind != "hang", finding.message  # the idle rank's ledger proves it at once


def test_idle_ranks_never_call_the_target_and_pass(pool) -> None:
    case = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((3,))), groups=((0, 2),))
    call = Call(name="gather", positional=(("dim", "dim"),), keywords=(("group", "group"),), group_optional=True)
    outcome = pool.run(case, "examples.with_group:gather", call=call)
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


# -- called as its authors' callers call it ---------------------------------------------------------


def forms_seen(seen: set[bool]) -> Callable[[Progress], None]:
    """An ``on_example`` callback noting whether each case passed the optional group."""
    return lambda progress: seen.add(progress.current.world_group) if progress.current else None


@pytest.mark.slow
def test_lightnings_allgathergrad_arity_bug_is_found_as_written(pool, tmp_path: Path) -> None:
    """Lightning#6624: ``AllGatherGrad.apply(x, group)`` -- the call Lightning makes -- returns one
    gradient for two inputs; ``apply(x)`` alone would pass.  The minimal case makes that call,
    and so does its repro script."""
    report = run_check(f"{PLANTED}:AllGatherGrad", Contract(grad="sum"), timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.convention is not None
    assert report.convention.describe() == "AllGatherGrad.apply(x, group) and AllGatherGrad.apply(x) -> stack (detected)"
    [finding] = report.findings
    assert finding.property == "gradients" and "incorrect number of gradients (expected 2, got 1)" in finding.message
    assert finding.case.world_group and finding.to_json()["call"]["made"] == "AllGatherGrad.apply(x, group)"
    assert finding.found_by.startswith("the stratified examples"), "the first stratum with gradients passes the group: found before any drawn example"
    script = repro.write(finding, f"{PLANTED}:AllGatherGrad", tmp_path)
    assert "called as AllGatherGrad.apply(x, group)" in script.read_text()
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
                          env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")})
    assert done.returncode == 1 and "incorrect number of gradients (expected 2, got 1)" in done.stdout, done.stdout


def test_the_fixed_allgathergrad_passes_called_both_ways(pool) -> None:
    seen: set[bool] = set()
    report = run_check(f"{PLANTED}:AllGatherGradFixed", Contract(grad="sum"), max_examples=BUDGET, timeout_s=CASE_TIMEOUT_S,
                       pool=pool, on_example=forms_seen(seen))
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert seen == {True, False}, "both calls must be made"


def test_rank_and_world_size_are_those_of_the_group_passed(pool) -> None:
    """``all_gather_features(features, rank, world_size)`` puts x back at slot ``rank``: right
    only with the group rank and size, which subgroups whose ranks differ from global ones test."""
    cases: list[Case] = []
    report = run_check(f"{ROOT}/examples/with_rank.py:all_gather_features", Contract(ragged=False, grad="local", groups=True),
                       max_examples=BUDGET, timeout_s=CASE_TIMEOUT_S, pool=pool,
                       on_example=lambda progress: cases.append(progress.current) if progress.current else None)
    assert report.convention is not None and report.convention.describe() == (
        "all_gather_features(x, rank=rank, world_size=world_size, group=group) -> tensor (detected)")
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert any(group_rank_differs(case) for case in cases)


def test_a_fixed_switch_is_passed_on_every_call(pool) -> None:
    """Lightning's ``_all_gather_ddp_if_available(x, sync_grads=True)``: differentiable only with the switch."""
    target = f"{ROOT}/examples/sync_grads.py:all_gather"
    switched = run_check(target, Contract(grad="sum", kwargs=(("sync_grads", "True"),)), max_examples=BUDGET,
                         timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert switched.verdict == "pass", "\n\n".join(finding_message(f) for f in switched.findings)
    assert switched.convention is not None and switched.convention.forms == (
        "all_gather(x, group=group, sync_grads=True)", "all_gather(x, sync_grads=True)")
    # without the switch the result never requires grad: the contract's mistake (exit 2), not a finding
    with pytest.raises(UsageError, match=r"^--grad sum: the result of all_gather\(x, group=group\) requires grad "
                                         r"on none of the probe's cases \(W=1 and W=2\): did you mean --kwarg "
                                         r"sync_grads=True \(kwargs=\{'sync_grads': True\} from Python\)\? "):
        run_check(target, Contract(grad="sum"), max_examples=BUDGET, timeout_s=CASE_TIMEOUT_S, pool=pool)


def test_the_call_and_its_fixed_arguments_are_echoed(pool, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status = cli.main(["check", f"{ROOT}/examples/sync_grads.py:all_gather", "--grad", "sum",
                       "--kwarg", "sync_grads=True", "--max-examples", "10", "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    assert status == 0, out
    called = "all_gather(x, group=group, sync_grads=True) and all_gather(x, sync_grads=True) -> stack (detected)"
    assert f"  called as {called}\n" in out and "kwargs(sync_grads=True)" in out
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["convention"] == called and written["contract"].endswith("kwargs(sync_grads=True)")


def test_an_inferred_dim_that_works_is_checked_and_said(pool) -> None:
    report = run_check(f"{PLANTED}:gather_dim_by_args", Contract(), max_examples=20, timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert any("names no dim parameter: passed by position, inferred" in note for note in report.notes)


# -- a target that takes no dim: the dim it works along is read off its results --------------------

DIMLESS = [("gather_last_dim", -1), ("gather_dim_1", 1), ("_gather_x_group", 0)]


@pytest.mark.parametrize("name, dim", DIMLESS, ids=[name for name, _ in DIMLESS])
def test_the_dim_of_a_target_that_takes_none_is_detected_said_and_checked(pool, name: str, dim: int) -> None:
    report = run_check(f"{PLANTED}:{name}", Contract(ragged=False), max_examples=30, timeout_s=CASE_TIMEOUT_S,
                       pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert f"takes no dim: it works along dim {dim} (detected; --dims N to say otherwise)" in " ".join(report.notes)
    assert report.contract.dims == str(dim)


@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_a_detected_dim_still_finds_the_bug_along_it(pool) -> None:
    report = run_check(f"{PLANTED}:gather_last_dim_reversed", Contract(ragged=False), max_examples=60,
                       timeout_s=CASE_TIMEOUT_S, pool=pool, shrink_budget_s=20.0)
    assert report.contract.dims == "-1"
    [finding] = report.findings
    assert finding.property == "values" and finding.case.dim == -1 and finding.case.world_size == 2, finding.message


@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_a_dim_given_is_taken_and_never_replaced(pool) -> None:
    report = run_check(f"{PLANTED}:gather_last_dim", Contract(ragged=False, dims="0"), max_examples=30,
                       timeout_s=CASE_TIMEOUT_S, pool=pool, shrink_budget_s=5.0)
    assert "takes no dim: checked along dim 0 (--dims 0)" in " ".join(report.notes)
    assert report.findings and report.findings[0].property == "shape"  # the declared dim is held, and it is wrong


def test_a_target_taking_a_dim_is_given_the_fixed_one(pool) -> None:
    report = run_check("examples.with_group:gather", Contract(dims="-2"), max_examples=30, timeout_s=CASE_TIMEOUT_S,
                       pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert report.coverage is not None and set(report.coverage.by_axis["dim"]) == {"-2"}
    assert set(report.coverage.by_axis["ndim"]) == {"2", "3", "4"}


@pytest.mark.parametrize("name, message", [
    ("gather_last_dim_of_3d_only", "takes no dim, and the probe cannot tell which dim it works along (the dims whose "
                                   "W=2 case it answers, by input: 2-d: none; 3-d: 2; 4-d: none); give the dim with "
                                   "--dims N (dims=N from Python), and --ndims A-B"),
    ("hangs_on_a_2d_input", "takes no dim, and while the probe tried which dim it works along, "
                            "hangs_on_a_2d_input(x) on W=2"),
], ids=["no dim fits", "hangs"])
def test_a_dim_the_probe_cannot_read_is_exit_2_naming_dims(pool, name: str, message: str) -> None:
    started = time.monotonic()
    with pytest.raises(UsageError, match=re.escape(message)):
        run_check(f"{PLANTED}:{name}", Contract(ragged=False), max_examples=10, timeout_s=3.0, pool=pool)
    assert time.monotonic() - started < 30  # one timeout, not one per dim tried


def test_the_3d_only_target_passes_once_its_inputs_are_said(pool) -> None:
    report = run_check(f"{PLANTED}:gather_last_dim_of_3d_only", Contract(ragged=False, ndims=(3, 3)),
                       max_examples=30, timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert report.contract.dims == "-1"


def test_a_file_target_imports_its_sibling_as_python_would(pool, tmp_path: Path) -> None:
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "tp_glue.py").write_text("def cat(pieces, dim):\n    import torch\n"
                                                     "    return torch.cat(pieces, dim)\n")
    (tmp_path / "helpers" / "gather.py").write_text(
        "import torch, torch.distributed as dist\nfrom tp_glue import cat\n\n"
        "def gather(x, dim):\n    out = [torch.empty_like(x) for _ in range(dist.get_world_size())]\n"
        "    dist.all_gather(out, x.contiguous())\n    return cat(out, dim)\n")
    report = run_check(str(tmp_path / "helpers" / "gather.py:gather"), Contract(ragged=False), max_examples=10,
                       timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)


# -- misfits and failures on the probe, through the command line --------------------------------------

MISFITS = [
    # published gathers whose second parameter is no dim: once called with the dim there (a false finding)
    (["CLIP4ClipAllGather"], "CLIP4ClipAllGather.apply(tensor, args) needs 'args', which the harness cannot supply"),
    (["gather_from_model_parallel_region"], "gather_from_model_parallel_region(input, natoms) needs 'natoms'"),
    (["gather_features"], "needs 'text_features', which the harness cannot supply: it passes x as 'image_features'"),
    (["VlkitAllGather"], "VlkitAllGather.apply(tensor_list, tensor) needs 'tensor'"),
    (["all_gather_anchor_positive_pairs"], "needs 'positives'"),
    (["all_gather"], "all_gather(embeddings, labels) needs 'labels'"),
    (["returns_dict"], "returned a dict; no convention reads it"),
    (["per_rank_list", "--output", "tensor"], "which --output tensor does not read; --output list would fit"),
    (["NotAFunction"], "NotAFunction is a class, not an autograd.Function"),
    (["NOT_CALLABLE"], "'NOT_CALLABLE' is of type int, not a callable gather"),
    (["no_group", "--groups"], "takes no group parameter (named group, process_group, pg), but --groups passes one"),
    (["reads_by_its_group"], "its result reads as tensor when called as reads_by_its_group(x, group=group) and as list "
                             "when called as reads_by_its_group(x); declare --output to check one way"),
    (["gather_by_args"], "dim was inferred (gather_by_args(*args, **kwargs) names no such parameter), so this is not "
                         "a finding"),
    (["AllGatherGrad", "--kwarg", "sync_grads=True"], "--kwarg sync_grads: AllGatherGrad.apply(tensor, group="),
    (["AllGatherGrad", "--kwarg", "sync_grads"], "--kwarg 'sync_grads': expected NAME=LITERAL"),
    (["AllGatherGrad", "--kwarg", "mode=sum"], "--kwarg mode=sum: 'sum' is not a Python literal (True, 3, 0.5, None, "
                                               "'text' with its quotes"),
]


@pytest.mark.parametrize("args, message", MISFITS, ids=[m[0][0] + (" " + " ".join(m[0][1:]) if m[0][1:] else "")
                                                         for m in MISFITS])
def test_a_misfit_is_exit_2_with_one_line_in_seconds(pool, capsys: pytest.CaptureFixture[str], args: list[str],
                                                     message: str) -> None:
    started = time.monotonic()
    status = cli.main(["check", f"{ROOT}/tests/planted/conventions.py:{args[0]}", *args[1:]])
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    assert (status, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert elapsed < MISFIT_LIMIT_S


@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_an_exception_inside_the_target_on_the_probe_case_is_a_shrunk_finding(
        pool, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """It fails on the probe's own case (W=2, 3 elements per rank), and is shrunk from there."""
    started = time.monotonic()
    status = cli.main(["check", f"{ROOT}/tests/planted/conventions.py:name_error_at_two_ranks", "--repro-dir",
                       str(tmp_path), "--quiet"])
    elapsed = time.monotonic() - started
    out = capsys.readouterr().out
    assert status == 1 and elapsed < MISFIT_LIMIT_S, out
    assert "FAIL: 1 property violated (values) in " in out
    assert "NameError: name 'undefined_helper' is not defined" in out
    assert "case: W=2 gloo/cpu float32 dim=0 grad=none | r0 (0,) iota | r1 (0,) iota" in out, out
    assert "found first by the calling-convention probe's own case" in out


def test_a_method_named_through_its_class_is_refused_with_a_wrapper_that_does_not_call_itself() -> None:
    """``module:Class.gather`` has no instance: exit 2 saying so, and the wrapper offered is named
    apart from the target (never ``def gather(x, dim): return gather(x, ...)``)."""
    from harness.core.binding import plan_call
    from harness.core.errors import Misfit

    class Gatherer:
        def gather(self, x, dim): ...

    with pytest.raises(Misfit, match=r"is a method .* def checked_gather\(x, dim\): return MyClass\(\.\.\.\)\.gather"):
        plan_call(Gatherer.gather)
    assert plan_call(Gatherer().gather).describe() == "gather(x, dim)"


# -- a signature read off the source, before any rank starts -----------------------------------------

#: Functions whose signature reads exactly from the source, and ones whose does not.
STATIC_SOURCE = '''from __future__ import annotations

import functools

import torch


def plain(x, dim):
    return x


def everything(x: torch.Tensor, /, dim: int = -1, *sizes: int, group=None, op: str = "sum", **more) -> torch.Tensor:
    return x


def two_dims(x, dim, seq_dim):
    return x


def inner(x, dim):
    return x


@functools.wraps(inner)
def decorated(x, seq_dim):
    return x


def reassigned(x, dim, seq_dim):
    return x


@torch.no_grad()
def without_grad(x, dim, seq_dim):
    return x


@functools.lru_cache(maxsize=4)
@torch.enable_grad()
def cached_with_grad(x, dim):
    return x


reassigned = functools.partial(reassigned, seq_dim=0)


class Klass:
    def method(self, x, dim):
        return x


if torch.__version__:
    def conditional(x, dim, seq_dim):
        return x
'''


def _static_module(tmp_path: Path, name: str = "static_targets", source: str = STATIC_SOURCE):
    """``source`` written to ``<tmp_path>/<name>.py`` and imported: what ``inspect`` gives to compare with."""
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_a_plain_functions_signature_reads_off_its_source_as_inspect_gives_it(tmp_path: Path) -> None:
    import inspect

    from harness.ranks.targets import static_signature

    path, module = _static_module(tmp_path)
    for name in ("plain", "everything", "two_dims", "without_grad", "cached_with_grad"):
        assert str(static_signature(f"{path}:{name}")) == str(inspect.signature(getattr(module, name))), name


@pytest.mark.slow  # torch.compile imports dynamo (5 s)
def test_a_compiled_functions_signature_reads_off_its_source_as_inspect_gives_it(tmp_path: Path) -> None:
    import inspect

    from harness.ranks.targets import static_signature

    path, module = _static_module(tmp_path, "compiled_target",
                                  "import torch\n\n\n@torch.compile\ndef gather(x, dim, seq_dim=0):\n    return x\n")
    assert str(static_signature(f"{path}:gather")) == str(inspect.signature(module.gather)) == "(x, dim, seq_dim=0)"


def test_a_signature_the_source_does_not_show_exactly_is_left_to_the_ranks(tmp_path: Path) -> None:
    from harness.ranks.targets import static_signature

    path, _ = _static_module(tmp_path)
    for name in ("decorated", "reassigned", "Klass", "Klass.method", "conditional", "missing"):
        assert static_signature(f"{path}:{name}") is None, name
    starred = tmp_path / "starred.py"
    starred.write_text("def gather(x, dim, seq_dim):\n    return x\n\nfrom os.path import *\n")
    assert static_signature(f"{starred}:gather") is None  # the star import may rebind it
    aliased = tmp_path / "aliased.py"  # torch.no_grad is not torch's when torch is another module
    aliased.write_text("import numpy as torch\n\n\n@torch.no_grad()\ndef gather(x, dim):\n    return x\n")
    assert static_signature(f"{aliased}:gather") is None
    assert static_signature("harness.ragged:all_gather_ragged") is not None  # a module found on the path


def test_an_unfit_signature_is_refused_before_any_rank_as_the_ranks_refuse_it(
        pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same :class:`Misfit`, word for word, as the ranks' plan; and no rank was asked (the
    capabilities a check measures first are never measured)."""
    from harness import check_gather
    from harness.frontends import api
    from harness.search import probe

    path, _ = _static_module(tmp_path)
    contract = Contract()
    with pytest.raises(Misfit) as on_ranks:
        probe.plan(pool, f"{path}:two_dims", contract)
    with pytest.raises(Misfit) as early:
        probe.refuse_unfit_signature(f"{path}:two_dims", contract)
    assert str(early.value) == str(on_ranks.value) and "'seq_dim' names a dim" in str(early.value)
    probe.refuse_unfit_signature(f"{path}:plain", contract)  # a fitting one passes on to the ranks
    probe.refuse_unfit_signature(f"{path}:conditional", contract)  # an unread one too: the ranks refuse it

    def no_rank(*_: object, **__: object) -> None:
        raise AssertionError("a rank was asked")

    monkeypatch.setattr(api.capabilities, "measure", no_rank)
    with pytest.raises(Misfit, match="'seq_dim' names a dim"):
        check_gather(f"{path}:two_dims")
