"""Each catalogue variant gets exactly its known verdict, on every supported torch release.

A variant that passes must keep passing (no false alarms); a variant with a known flaw
must keep failing on the property that flaw breaks, with a minimal case of the expected
shape.  A harness change that stops catching a known bug turns this red.  The verdicts are
torch 2.13's; :data:`ON_OTHER_RELEASES` lists, per measured release range, what torch itself
does differently there and why (each a torch bug with its standalone script in
``docs/findings/``, or a documented limit of that release), and a finding on such a release is
accepted only when one of them explains it.  A path the installed torch lacks is skipped with
the catalogue's ``unavailable`` reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

from harness.core.case import Case, make_input
from harness.search.engine import run_check
from harness.search.finding import Finding
from harness.search.shrinking import MAX_SHRINK_STEPS
from harness.variants import CATALOGUE, by_name

pytestmark = pytest.mark.slow  # every catalogue variant is a whole search (up to 30 s each)

PASS_BUDGET = 60  # examples for a variant that must pass
FAIL_BUDGET = 150  # examples within which a known flaw must be found


def is_zero(case: Case) -> bool:
    """Rank 0's input holds only zeros (0, 0.0 or False): what an unpad-by-value drops."""
    return bool((make_input(case, 0) == 0).all())


def non_contiguous_cotangent(case: Case) -> bool:
    return any(spec.cotangent_layout != "contiguous" for spec in case.ranks)


def input_layouts_differ(case: Case) -> bool:
    return len({spec.layout for spec in case.ranks}) > 1


def non_contiguous_input(case: Case) -> bool:
    return any(spec.layout != "contiguous" for spec in case.ranks)


def is_complex(case: Case) -> bool:
    return case.dtype.startswith("complex")


def not_chunk_lengths(case: Case) -> bool:
    """Per-rank lengths ``torch.chunk`` would not produce: what DTensor's ``Shard`` cannot describe."""
    total, world = sum(case.lengths), case.world_size
    size = -(-total // world)  # torch.chunk's chunk size: ceil
    chunk = [max(0, min(size, total - size * rank)) for rank in range(world)]
    return list(case.lengths) != chunk


def group_not_leading_ranks(case: Case) -> bool:
    """Some group's members are not global ranks 0..n-1 (torch.distributed.nn's backward needs them to be)."""
    return any(group != tuple(range(len(group))) for group in case.groups)


def view_race(finding: Finding) -> bool:
    """torch 2.13 funcol: complex + requires_grad output view regenerated after gloo bumped its version.

    The rank that loses the race raises ("... modified inplace") after the forward collective; its
    peers go on into the backward's reduce-scatter and block there, so on a complex case the race
    shows either as that error or as a hang/crash of the set (seen in CI: a W=2 complex128 hang).
    Any other property, or any finding on a real dtype, is not this race.  (On an all-empty case
    the peers' reduce-scatter completes without the rank that raised; the pool used to keep that
    set, one collective tag apart, and the next check's first W=3 case on it hung: the float32
    hang no replay reproduced in earlier suite runs.  Such sets are now replaced.)
    """
    if not is_complex(finding.case):
        return False
    return "modified inplace" in finding.message or finding.property == "no-hang-no-crash"


#: name -> (properties of which one must fail, what every minimal counterexample looks like, why)
KNOWN_FLAWS: dict[str, tuple[tuple[str, ...], Callable[[Case], bool], str]] = {
    "pad_to_max_1d": (("values",), lambda c: c.ndim >= 2 and c.world_size == 1,
                      "written for 1-D tensors: an N-d input raises even on one rank"),
    "pad_unpad_by_value": (("shape",), lambda c: c.world_size == 1 and c.ranks[0].shape == (1,) and is_zero(c),
                           "padding removed by value drops genuine zeros (0.0, or False for bool)"),
    "clip4clip_all_gather": (("gradients",), lambda c: c.world_size == 2,
                             "backward slices without reducing: local, not the claimed sum"),
    "bolts_sync_function": (("gradients",), non_contiguous_cotangent,
                            "all_reduce of a non-contiguous cotangent clone on gloo sums the wrong elements"),
    "lucidrains_all_reduce": (("gradients",), non_contiguous_cotangent,
                              "same: all_reduce on the non-contiguous cotangent"),
    # It takes an optional group, so it is checked on subgroups too, where its backward also fails.
    "torch_nn_all_gather": (("gradients",), lambda c: (non_contiguous_cotangent(c) and c.ndim >= 2)
                            or group_not_leading_ranks(c),
                            "torch 2.13 gloo backward (all_to_all) ignores cotangent strides: grad comes back "
                            "transposed (pytorch#192920); on subgroups it raises (pytorch#130515)"),
    # The same path has both flaws: which of the two one gradients finding shows depends on the
    # search's path (this row, run alone, shrank to the transposed cotangent before subgroups were
    # drawn by default too), so either minimal case is the path's known flaw.
    "torch_nn_all_gather_groups": (("gradients",), lambda c: group_not_leading_ranks(c) or (
                                       non_contiguous_cotangent(c) and c.ndim >= 2),
                                   "backward raises 'Global rank 0 is not part of group' (pytorch#130515), or "
                                   "the transposed gradient of torch_nn_all_gather (pytorch#192920)"),
    "all_gather_into_tensor_stack": (("values",), lambda c: c.world_size == 1,
                                     "gloo rejects the documented stacked output form (pytorch#178798)"),
    "dtensor_redistribute_uneven": (("values", "gradients", "no-hang-no-crash"), not_chunk_lengths,
                                    "from_local(shape=) only handles torch.chunk layouts (pytorch#144109)"),
    "funcol_all_gather_into_tensor_coalesced": (("values",), is_complex,
                                                "gloo raises 'Invalid scalar type' for complex (docs/findings)"),
    # the neighbours (measured by `report` on torch 2.13; see the reduce-scatter and all-to-all tables of docs/report.md)
    **{name: (("values",), input_layouts_differ,
              "c10d reduce-scatter on gloo pairs elements by storage order: a rank whose input is laid out "
              "differently sums the wrong elements (the pytorch#192920 family; docs/findings)")
       for name in ("rs_reduce_scatter_single", "rs_reduce_scatter_tensor", "rs_reduce_scatter_tensor_max")},
    "rs_reduce_scatter_list": (("values",), non_contiguous_input,
                               "the list form pairs each piece in its storage order with out's: wrong also "
                               "when every rank's pieces are transposed alike (docs/findings)"),
    "rs_nn_reduce_scatter": (("no-hang-no-crash", "gradients"), lambda c: c.is_ragged,
                             "ragged slots: the backward gathers the cotangents into buffers shaped like this "
                             "rank's: gloo aborts one rank, another sums uninitialized memory (docs/findings)"),
    "rs_megatron_ragged": (("no-hang-no-crash", "gradients"), lambda c: c.is_ragged,
                           "ragged slots: the backward all_gathers unequal cotangents, which gloo refuses "
                           "('invalid tensor size': equal sizes only)"),
    "megatron_tensor_parallel": (("gradients",), lambda c: c.ranks[0].shape[-1] == 0 and c.world_size >= 2,
                                 "a zero-length last dim: torch.split into 0-long pieces gives one piece, and the "
                                 "backward's input_list[rank] is out of range"),
    "megatron_tensor_parallel_sum": (("gradients",), lambda c: c.ranks[0].shape[-1] == 0,
                                     "a zero-length last dim: the backward's reshape(-1, 0) raises"),
    "rs_megatron_tensor_parallel": (("values",), lambda c: c.ranks[0].shape[-1] == 0,
                                    "a zero-length last dim: reshape(-1, 0) raises on every rank, W = 1 included"),
    **{name: (("values",), is_complex, "raises 'Invalid scalar type' on complex (gloo, funcol all_to_all_single)")
       for name in ("a2a_funcol_all_to_all_single", "a2a_funcol_all_to_all_single_autograd")},
    "a2a_all_to_all_single": (("values",), non_contiguous_input, "raises 'Tensors must be contiguous' on a view"),
    "a2a_nn_all_to_all_single": (("values",), non_contiguous_input, "raises 'Tensors must be contiguous' on a view"),
    "a2a_all_to_all_list": (("values", "no-hang-no-crash"), lambda c: c.is_ragged,
                            "gloo's alltoall (list form) takes equal sizes only: ragged splits raise "
                            "'invalid tensor size'"),
    # Both flaws are on its path; which a values finding shows depends on the strata met first.
    "a2a_nn_all_to_all": (("values", "no-hang-no-crash"), lambda c: c.is_ragged or group_not_leading_ranks(c),
                          "gloo's alltoall (list form) takes equal sizes only: ragged splits raise 'invalid "
                          "tensor size'; on a subgroup the forward raises 'Global rank 0 is not part of group' "
                          "(pytorch#130515)"),
    # the all-reduces (measured by `report` on torch 2.13; docs/report.md's all-reduce table)
    "ar_c10d_all_reduce": (("values",), lambda c: non_contiguous_input(c) and c.world_size >= 2,
                           "gloo's all_reduce pairs elements by storage order: a non-dense or differently laid out "
                           "x gets the wrong sums (docs/findings/gloo_all_reduce_strided_view.py)"),
    "ar_funcol_all_reduce_avg": (("gradients", "values", "no-hang-no-crash"),
                                 lambda c: c.world_size == 1 or is_complex(c),
                                 "backward raises \"only supports 'sum' reduction, got 'avg'\" (pytorch#190007), "
                                 "from W=1; on complex, funcol's view race (docs/findings)"),
    "ar_megatron_reduce_from_region": (("values", "inputs-untouched"), lambda c: c.world_size >= 2,
                                       "_reduce all-reduces input_.contiguous() and returns input_: a non-contiguous "
                                       "input comes back unreduced, a contiguous one is the caller's tensor, written "
                                       "in place without moving its version counter"),
    "ar_flash_attn": (("inputs-untouched",), lambda c: c.world_size >= 2,
                      "all_reduce_raw reduces input_.contiguous(): a contiguous input is the caller's tensor, "
                      "written in place without moving its version counter (docs/findings/"
                      "inplace_all_reduce_silent_gradient.py)"),
    "split_megatron_tensor_parallel": (("values",), lambda c: c.ranks[0].shape[-1] == 0 and c.world_size >= 2,
                                       "a zero-length last dim: torch.split into 0-long pieces gives one piece, and "
                                       "input_list[rank] is out of range"),
    "copy_megatron": (("gradients",), lambda c: non_contiguous_cotangent(c) and c.world_size >= 2,
                      "_reduce all-reduces grad_output.contiguous() and returns grad_output: a non-contiguous "
                      "cotangent comes back unreduced"),
    "bcast_c10d": (("values",), lambda c: non_contiguous_input(c) and c.world_size >= 2,
                   "gloo's broadcast writes by storage order: a rank whose x is laid out differently, or not "
                   "dense, gets the source's values in the wrong places (pytorch#192920)"),
    "bcast_nn": (("values", "gradients"), lambda c: group_not_leading_ranks(c) or input_layouts_differ(c)
                 or non_contiguous_cotangent(c),
                 "its forward broadcasts x.clone() and its backward reduces the cotangent, both by storage order on "
                 "gloo (pytorch#192920); on a subgroup the backward zeroes the source's gradient where the global "
                 "src differs from the group rank (the pytorch#130515 / #190583 family)"),
    "scatter_nn": (("values", "gradients", "no-hang-no-crash"),
                   lambda c: non_contiguous_input(c) or is_complex(c) or group_not_leading_ranks(c),
                   "gloo's scatter reads a non-dense piece by storage order (pytorch#192920); its backward's gather "
                   "raises 'Invalid scalar type' on complex; on a subgroup the source is told by the group rank and "
                   "passed on as the global one (docs/findings/nn_gather_scatter_subgroup_root.py)"),
    "reduce_c10d": (("values",), lambda c: non_contiguous_input(c) and c.world_size >= 2,
                    "gloo's reduce pairs elements by storage order: a non-dense or differently laid out x gets the "
                    "wrong sums (pytorch#192920)"),
    "reduce_nn": (("values", "gradients"), lambda c: input_layouts_differ(c) or non_contiguous_cotangent(c),
                  "it reduces x.clone() and broadcasts the cotangent, both by storage order on gloo (pytorch#192920)"),
    "gather_to_nn": (("values", "gradients", "no-hang-no-crash"), lambda c: group_not_leading_ranks(c) or is_complex(c),
                     "on a subgroup the destination is told by the group rank and passed on as the global one "
                     "(docs/findings/nn_gather_scatter_subgroup_root.py); gloo's gather raises 'Invalid scalar "
                     "type' on complex"),
    # the re-layouts (sequence parallelism's all-to-all), each flaw replayed by hand: W=2, (2, b, 2, 1)
    "a2a_deepspeed_ulysses": (("values", "gradients"), lambda c: 0 in c.ranks[0].shape or c.ranks[0].shape[1] > 1,
                              "reshape([-1, W, ...]) of an empty input raises; the backward (0 -> 2) leaves the "
                              "world between sequence and batch: wrong gradients for a batch of two or more"),
}
#: Variants whose flaws show only intermittently: every finding must be one of the known ones.
INTERMITTENT: dict[str, tuple[Callable[[Finding], bool], str]] = {
    name: (view_race,
           "torch 2.13: complex + requires_grad races gloo's in-place write of the output view "
           "(docs/findings/funcol_complex_autograd_view_race.md)")
    for name in ("funcol_all_gather_tensor", "funcol_all_gather_tensor_autograd", "funcol_all_gather_single",
                 "funcol_all_gather_single_autograd", "funcol_all_gather_mesh", "funcol_mesh2d", "ar_funcol_all_reduce")
}
MUST_PASS = [spec.name for spec in CATALOGUE if spec.name not in KNOWN_FLAWS and spec.name not in INTERMITTENT]

#: The installed torch's (major, minor) release.
RELEASE = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])


@dataclass(frozen=True)
class Difference:
    """What torch releases ``first`` to ``last`` (inclusive, measured) do to these rows, unlike 2.13.

    ``explains`` recognizes the findings it causes; ``masks`` says it can stand in for the row's
    2.13 flaw (Hypothesis reports one minimal case per property, and this one may come first).
    """

    names: tuple[str, ...]
    first: tuple[int, int]
    last: tuple[int, int]
    explains: Callable[[Finding], bool]
    why: str
    masks: bool = False

    def applies(self, name: str) -> bool:
        return name in self.names and self.first <= RELEASE <= self.last


def says(*texts: str) -> Callable[[Finding], bool]:
    """A finding whose message (the ranks' errors included) contains one of ``texts``."""
    return lambda finding: any(text in finding.message for text in texts)


def peers_left_waiting(finding: Finding) -> bool:
    """A hang or crash of the set: what a torch error raised on some ranks only leaves behind."""
    return finding.property == "no-hang-no-crash"


DTENSOR_ROWS = ("dtensor_redistribute", "dtensor_redistribute_uneven", "dtensor_full_tensor",
                "dtensor_full_tensor_sum_grad", "dtensor_mesh2d")
OLD_FUNCOL_ROWS = ("funcol_all_gather_tensor", "funcol_all_gather_tensor_autograd",
                   "funcol_all_gather_into_tensor_coalesced")
#: Measured on every minor release from 2.4 to 2.15 (docs/torch-versions.md); each range is
#: where the standalone script named reproduces.
ON_OTHER_RELEASES: list[Difference] = [
    Difference(("lucidrains_all_reduce",), (2, 4), (2, 9), says("resulted in a negative output size"),
               "F.pad raises on a zero-size dim that gets no padding, on the rank holding such a tensor, while "
               "its peers wait (docs/findings/pad_zero_size_dim.py)"),
    Difference(DTENSOR_ROWS + OLD_FUNCOL_ROWS, (2, 4), (2, 8),
               lambda f: is_complex(f.case) and (says("Invalid scalar type")(f) or peers_left_waiting(f)),
               "the functional all_gather, and so DTensor, hands gloo complex tensors it cannot move "
               "(docs/findings/funcol_all_gather_complex_gloo.py)", masks=True),
    Difference(OLD_FUNCOL_ROWS, (2, 4), (2, 10),
               lambda f: says("A view was created in no_grad mode")(f) or peers_left_waiting(f),
               "the functional all_gather's result raises when detached before a wait, on some ranks and calls, "
               "leaving the others waiting (docs/findings/funcol_detach_before_wait.py)", masks=True),
    Difference(OLD_FUNCOL_ROWS, (2, 4), (2, 11),
               lambda f: says("is_contiguous", "must be contiguous", "AssertionError")(f) or peers_left_waiting(f),
               "the functional all_gather rejects non-contiguous inputs and cotangents "
               "(docs/findings/funcol_all_gather_tensor_noncontiguous.py)", masks=True),
    # the neighbours: measured on 2.4.1, 2.13.0 and 2.15.0 only, so each range ends at 2.4
    Difference(("rs_reduce_scatter_tensor", "rs_funcol_reduce_scatter_tensor", "rs_funcol_reduce_scatter_tensor_autograd",
                "rs_megatron_sequence_parallel"), (2, 4), (2, 4), lambda f: is_complex(f.case),
               "gloo's reduce-scatter moves no complex tensor yet", masks=True),
    Difference(("rs_reduce_scatter_tensor_max",), (2, 4), (2, 4), lambda f: f.property == "values",
               "gloo's reduce_scatter_tensor sums whatever the op (docs/findings/gloo_reduce_scatter_tensor_op_ignored.py)",
               masks=True),
    Difference(("rs_reduce_scatter_list", "rs_nn_reduce_scatter", "rs_megatron_ragged"), (2, 4), (2, 4),
               lambda f: says("does not support reduce_scatter")(f) or peers_left_waiting(f),
               "gloo has no list reduce_scatter yet (pytorch PR #149869 added it)", masks=True),
    Difference(("rs_funcol_reduce_scatter_tensor",), (2, 4), (2, 4), lambda f: non_contiguous_input(f.case),
               "the functional reduce-scatter pairs elements by storage order when layouts differ (values and the "
               "gradients through them)", masks=True),
    Difference(("rs_funcol_reduce_scatter_tensor", "a2a_funcol_all_to_all_single"), (2, 4), (2, 4),
               says("grad of x=None"), "the functional reduce-scatter and all-to-all have no autograd yet",
               masks=True),
    Difference(("a2a_funcol_all_to_all_single", "a2a_funcol_all_to_all_single_autograd"), (2, 4), (2, 4),
               lambda f: non_contiguous_input(f.case),
               "the functional all-to-all reads a non-contiguous input by storage order", masks=True),
    Difference(("a2a_all_to_all_list", "a2a_nn_all_to_all"), (2, 4), (2, 4),
               lambda f: says("does not support alltoall")(f) or peers_left_waiting(f),
               "gloo has no list all_to_all yet", masks=True),
    # the rest of the family: measured on 2.4.1 and 2.13.0 only (2026-11-29)
    Difference(("ar_nn_all_reduce",), (2, 4), (2, 4),
               lambda f: non_contiguous_input(f.case) or any(s.cotangent_layout != "contiguous" for s in f.case.ranks),
               "the differentiable all_reduce pairs elements by storage order when the ranks' layouts differ (values "
               "and gradients)"),
    Difference(("ar_nn_all_reduce_avg", "ar_funcol_all_reduce_avg"), (2, 4), (2, 4),
               lambda f: says("Cannot use ReduceOp.AVG with Gloo")(f) or peers_left_waiting(f),
               "gloo has no AVG yet", masks=True),
    Difference(("ar_funcol_all_reduce",), (2, 4), (2, 4), says("grad of x=None"),
               "the functional all_reduce has no autograd yet", masks=True),
    Difference(("ar_funcol_all_reduce", "bcast_c10d", "bcast_funcol", "reduce_nn", "reduce_c10d"), (2, 4), (2, 4),
               lambda f: is_complex(f.case) and (says("Invalid scalar type")(f) or peers_left_waiting(f)),
               "gloo's broadcast and reduce move no complex tensor yet", masks=True),
    Difference(("funcol_all_gather_tensor", "funcol_all_gather_into_tensor_coalesced"), (2, 4), (2, 10),
               says("grad of x=None"),
               "all_gather_tensor and the coalesced form have no autograd yet (their docstrings there claim "
               "none; the catalogue holds them to the claim of the releases that registered it on the op)",
               masks=True),
]


def explained_here(name: str, finding: Finding) -> bool:
    """Whether a difference of the installed release explains ``finding`` of row ``name``."""
    return any(d.applies(name) and d.explains(finding) for d in ON_OTHER_RELEASES)


def masked_here(name: str) -> bool:
    return any(d.applies(name) and d.masks for d in ON_OTHER_RELEASES)


#: Per-case timeouts above the default 5 s.  The 2-D mesh rows build a mesh (and its second
#: dimension's groups) on a layout's first case, and on 2 busy cores such a case took over 5 s
#: now and then (an unreproduced hang: 5 failed runs in a row at 5 s).  Meshes are kept per layout
#: (``harness.variants.torch_paths._mesh2d``), so 10 s is enough: 9 runs of both rows, three at
#: once on 2 cores, passed (2026-11-29).  It was 30 s, which the intermittent row waits out twice
#: when its known race strikes (73 s of the suite's time; now about 25 s).
TIMEOUTS = {"dtensor_mesh2d": 10.0, "funcol_mesh2d": 10.0}


#: An intermittent row's findings are told apart by their property and message, which shrinking
#: does not change: its search stops shrinking at once (the shrinking of the race's findings, waits
#: for its hangs included, was most of these rows' 75 s in the suite).
NO_SHRINKING = 0


def check(pool, name: str, budget: int, max_shrink_steps: int = MAX_SHRINK_STEPS):
    """The variant's search; skipped, with the reason, where the installed torch lacks its path."""
    spec = by_name(name)
    missing = spec.unavailable()
    if missing:
        pytest.skip(f"{name} is unavailable: {missing}")
    return run_check(spec.target, spec.contract, max_examples=budget, timeout_s=TIMEOUTS.get(name, 5.0), pool=pool,
                     shrink_budget_s=30.0, max_shrink_steps=max_shrink_steps)


@pytest.mark.parametrize("name", MUST_PASS)
def test_variant_passes(pool, name: str) -> None:
    """Pass, and without a hang or crash seen even once (put aside as unreproduced, it would not fail
    the check, but in a correct variant it can only be the harness's or the machine's)."""
    report = check(pool, name, PASS_BUDGET)
    unexplained = [f for f in report.findings if not explained_here(name, f)]
    assert not unexplained, "\n\n".join(f.message for f in unexplained)
    assert not report.unattributed, report.warnings()


@pytest.mark.parametrize("name", list(KNOWN_FLAWS))
def test_known_flaw_is_found(pool, name: str) -> None:
    properties, minimal, why = KNOWN_FLAWS[name]
    report = check(pool, name, FAIL_BUDGET)
    found = [f for f in report.findings if f.property in properties and not explained_here(name, f)]
    assert found or (masked_here(name) and report.findings), (
        f"{name} ({why}): expected a failure of {properties}, got {report.verdict}")
    for finding in found:
        assert minimal(finding.case), f"{name}: unexpected minimal case\n{finding.message}"


@pytest.mark.parametrize("name", list(INTERMITTENT))
def test_intermittent_flaw_breaks_nothing_else(pool, name: str) -> None:
    known, _why = INTERMITTENT[name]
    report = check(pool, name, PASS_BUDGET, max_shrink_steps=NO_SHRINKING)
    unknown = [f for f in report.findings + report.unattributed if not known(f) and not explained_here(name, f)]
    assert not unknown, "\n\n".join(f.message for f in unknown)


def test_every_variant_has_a_verdict_here() -> None:
    assert sorted(MUST_PASS + list(KNOWN_FLAWS) + list(INTERMITTENT)) == sorted(s.name for s in CATALOGUE)
