"""The properties have teeth: every planted bug is found and shrunk to a case named in advance.

One planted gather (``tests/planted/bugs.py``) per property of BRIEF §4 and per dimension
of the strategies (BRIEF §5).  Each is searched with the CI budget over the full default
contract (every dtype gloo can gather), so the test also shows the strategies reach the
dimension that exposes the bug.  The expected minimal cases are what Hypothesis reaches
from any seed; where several minimal cases are equally small the assertion names the
features every one of them has.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from harness.core.case import Case, RankSpec
from harness.core.checks import IN_PLACE_NOTE, check_outcome
from harness.core.contract import Contract
from harness.core.conventions import Call
from harness.frontends.api import profile_settings
from harness.report.text import finding_message
from harness.search.engine import run_check
from harness.search.finding import Finding
from harness.variants.specs import GLOO_DTYPES
from tests.budgets import PLANTED_SHRINK_BUDGET_S, PLANTED_TIMEOUT_S
from tests.test_catalogue import RELEASE, is_zero

pytestmark = pytest.mark.slow  # every planted bug is a search with shrinking (150 examples each)

BUDGET = 150  # examples; the ci profile's 100 plus headroom for the rarer dimensions


def search(pool, name: str, **contract: object) -> dict[str, Finding]:
    report = run_check(f"tests.planted.bugs:{name}", Contract(**contract), max_examples=BUDGET,
                       timeout_s=PLANTED_TIMEOUT_S, pool=pool, shrink_budget_s=PLANTED_SHRINK_BUDGET_S)
    assert report.verdict == "fail", f"{name}: no counterexample in {report.examples} examples"
    return {finding.property: finding for finding in report.findings}


def shapes(case: Case) -> list[tuple[int, ...]]:
    return [spec.shape for spec in case.ranks]


def line(case: Case) -> str:
    return case.describe()


# (planted bug, contract, property it breaks (or the properties, any of which may come
# first), check of the minimal case)
EXPECTED: list[tuple[str, dict, str | tuple[str, ...], Callable[[Case], bool]]] = [
    # one per property
    ("reversed_ranks", {}, "values",
     lambda c: line(c) == "W=2 gloo/cpu float32 dim=0 grad=none | r0 (1,) iota | r1 (1,) iota"),
    ("float64_to_float32", {}, "dtype", lambda c: line(c) == "W=1 gloo/cpu float64 dim=0 grad=none | r0 (0,) iota"),
    ("forgot_unpad", {}, "shape",
     lambda c: line(c) == "W=2 gloo/cpu float32 dim=0 grad=none | r0 (0,) iota | r1 (1,) iota"),
    ("returns_meta", {}, "device", lambda c: line(c) == "W=1 gloo/cpu float32 dim=0 grad=none | r0 (0,) iota"),
    ("squeezes_input", {}, "inputs-untouched",
     lambda c: c.world_size == 1 and c.ndim == 2 and shapes(c) in ([(0, 1)], [(1, 0)])),
    ("local_only_backward", {"grad": "sum"}, "gradients",
     lambda c: c.dtype == "float32" and shapes(c) == [(0,), (1,)] and c.grad == "sum"),
    ("shared_output_buffer", {}, "stable", lambda c: line(c) == "W=1 gloo/cpu float32 dim=0 grad=none | r0 (1,) iota"),
    ("degrades_every_third_call", {}, "repeatable",
     lambda c: line(c) == "W=1 gloo/cpu float32 dim=0 grad=none | r0 (1,) iota"),
    # one per dimension of the strategies
    ("first_two_ranks_only", {}, "shape", lambda c: shapes(c) == [(0,), (0,), (1,)]),
    ("assumes_equal_lengths", {}, "shape", lambda c: shapes(c) == [(0,), (1,)]),
    # a length of 256 wraps to 0: one rank alone raises (values), two disagree (crash/hang)
    ("uint8_sizes", {}, ("values", "shape", "no-hang-no-crash"), lambda c: c.world_size <= 2 and 256 in c.lengths),
    # These two desync the group: each shrink step waits ~1 s for the stall, so within the
    # shrink budget the case reliably keeps only what exposes the bug (usually W=2, 2-d).
    # Ignoring dim also gives a wrong shape, without a desync, when the lengths are equal.
    ("ignores_dim", {}, ("no-hang-no-crash", "shape"),
     lambda c: c.world_size >= 2 and c.ndim >= 2 and c.dim % c.ndim != 0),
    ("negative_dim_off_by_one", {}, "no-hang-no-crash", lambda c: c.world_size >= 2 and c.ndim >= 2 and c.dim < 0),
    ("drops_imaginary", {}, "values", lambda c: line(c) == "W=1 gloo/cpu complex64 dim=0 grad=none | r0 (1,) iota"),
    # float32 0.0 (padding recipe) or bool False (iota): one rank, one element, and it is zero
    ("unpad_by_value", {}, "shape", lambda c: c.world_size == 1 and shapes(c) == [(1,)] and is_zero(c)),
    ("ignores_strides", {}, "values",
     lambda c: c.world_size <= 2 and any(s.layout in ("strided", "transposed") and s.shape[c.dim] for s in c.ranks)),
    ("contiguous_cotangent_only", {"grad": "sum"}, "gradients",
     lambda c: any(s.cotangent_layout != "contiguous" for s in c.ranks)),
]


@pytest.mark.parametrize("name, contract, prop, minimal", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_planted_bug_is_found_and_shrunk(pool, name: str, contract: dict, prop: str, minimal) -> None:
    findings = search(pool, name, **contract)
    wanted = [p for p in ((prop,) if isinstance(prop, str) else prop) if p in findings]
    assert wanted, f"{name}: expected a {prop} counterexample, got {sorted(findings)}"
    case = findings[wanted[0]].case
    assert minimal(case), f"{name}: minimal case not reached: {case.describe()}\n{findings[wanted[0]].message}"


@pytest.mark.parametrize("grad", ["none", "sum"])
def test_a_correct_gather_never_fails(pool, grad: str) -> None:
    report = run_check("tests.planted.bugs:correct", Contract(grad=grad), max_examples=200, timeout_s=10.0, pool=pool)
    assert report.verdict == "pass", "\n\n".join(f.message for f in report.findings)
    assert report.examples == 200


def test_misuse_probe_reports_a_silent_wrong_answer(pool) -> None:
    """Equal-only by claim; on ragged input it pads and never unpads, without a word."""
    report = run_check("tests.planted.bugs:forgot_unpad", Contract(ragged=False, dtypes=GLOO_DTYPES),
                       max_examples=BUDGET, timeout_s=PLANTED_TIMEOUT_S, pool=pool, probe_misuse=True,
                       shrink_budget_s=PLANTED_SHRINK_BUDGET_S)
    assert report.findings == []  # in contract it is correct
    [finding] = report.misuse_findings
    assert (finding.property, finding.kind) == ("misuse", "wrong-answer"), finding.message
    assert finding.case.is_ragged and finding.case.world_size == 2, finding.message


def test_misuse_probe_accepts_raising_on_every_rank(pool) -> None:
    report = run_check("tests.planted.bugs:equal_only_checked", Contract(ragged=False, dtypes=GLOO_DTYPES),
                       max_examples=60, timeout_s=PLANTED_TIMEOUT_S, pool=pool, probe_misuse=True)
    assert report.verdict == "pass", "\n\n".join(f.message for f in report.findings + report.misuse_findings)
    assert report.misuse_examples > 0


# -- an in-place write that keeps the values: the version counter sees it ------------------------

IN_PLACE = "tests.planted.bugs:writes_own_slot_in_place"
#: torch 2.4 and 2.5 refuse the write when the input is a leaf that requires grad, or a view of one: the
#: target raises in its forward instead (docs/findings/gloo_all_gather_into_leaf_view.py, measured on
#: every release from 2.4 to 2.15), which the harness reports as what it is, a ``values`` exception.
IN_PLACE_REFUSED = RELEASE <= (2, 5)
REFUSED = "leaf Variable that requires grad is being used in an in-place operation"  # "a view of a" or "a"
CI = profile_settings("ci")  # no example database: what earlier runs saved does not pick the case


def test_an_in_place_write_of_the_same_values_is_reported_with_its_consequence(pool) -> None:
    report = run_check(IN_PLACE, Contract(ragged=False, grad="local", dtypes=("float32",), world_sizes=(1, 2)),
                       max_examples=30, timeout_s=PLANTED_TIMEOUT_S, pool=pool, seed=1, base_settings=CI)
    [finding] = report.findings
    if IN_PLACE_REFUSED:
        assert (finding.property, finding.kind, finding.status) == ("values", "exception", "confirmed")
        assert REFUSED in finding.message, finding.message
        return
    assert (finding.property, finding.kind, finding.status) == ("inputs-untouched", "in-place", "confirmed")
    # a view's counter is its base's, which laying it out already moved: the numbers vary, not the words
    assert re.search(r"\(its version counter went from (\d+) to (?!\1)\d+\) though its values are unchanged",
                     finding.message), finding.message
    # a gradient that then comes out wrong (the write hit a view of the leaf) names its cause
    assert all("(the cause: the call wrote into its input in place, see inputs-untouched)" in v.message
               for v in finding.violations if v.property == "gradients")
    assert "'one of the variables needed for gradient computation has been modified by an inplace operation' when " \
           "the op before the collective saved its output (relu, sigmoid, ...)" in finding.message
    # What the message claims happens in a model, on a rank: relu saves its output, backward refuses.
    [result] = pool.call(1, "tests.planted.bugs:relu_then_in_place_gather")
    assert result is not None and "modified by an inplace operation" in result.value, result


def test_without_gradients_an_in_place_write_is_a_note_not_a_failure(pool) -> None:
    report = run_check(IN_PLACE, Contract(ragged=False, dtypes=("float32",), world_sizes=(1, 2)), max_examples=10,
                       timeout_s=PLANTED_TIMEOUT_S, pool=pool, seed=1, base_settings=CI)
    assert report.verdict == "pass", "\n\n".join(finding_message(finding) for finding in report.findings)
    assert report.notes == [IN_PLACE_NOTE]


def test_a_gather_that_writes_nothing_gets_no_note(pool) -> None:
    report = run_check("tests.planted.bugs:correct", Contract(dtypes=("float32",), world_sizes=(1, 2)),
                       max_examples=10, timeout_s=PLANTED_TIMEOUT_S, pool=pool, seed=1, base_settings=CI)
    assert report.verdict == "pass" and report.notes == []


def test_a_gradient_the_in_place_write_breaks_names_the_write_as_its_cause(pool) -> None:
    """Written into a view of the leaf, the same values turn the gradient wrong: said with its cause."""
    case = Case(ranks=(RankSpec((0,), layout="transposed"),), grad="local")
    violations = check_outcome(pool.run(case, IN_PLACE, call=Call()))
    if IN_PLACE_REFUSED:
        assert [(v.property, v.kind) for v in violations] == [("values", "exception")] and REFUSED in violations[0].message
        return
    assert [(v.property, v.kind) for v in violations] == [("inputs-untouched", "in-place"), ("gradients", "mismatch")]
    assert violations[1].message.endswith("(the cause: the call wrote into its input in place, see inputs-untouched)")
