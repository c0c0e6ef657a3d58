"""Our own gather, :func:`harness.ragged.all_gather_ragged`, stays correct on every supported torch.

Its values and gradients over the whole contract are the catalogue's business (``ours_*`` must
pass in ``tests/test_catalogue.py``, on every torch the tox environments run).  Here: the two
facts its design rests on, checked on the installed torch.  Older gloo (torch 2.4) cannot
reduce-scatter complex tensors, so the gather hands every collective a complex tensor's real
view; that is enough only while gloo reduce-scatters every real dtype a gradient can have.
"""

from __future__ import annotations

from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome
from harness.core.contract import DIFFERENTIABLE_DTYPES
from harness.pool import capabilities

#: The real dtype a complex tensor's ``view_as_real`` has.
CARRIED_AS = {"complex64": "float32", "complex128": "float64"}


def test_complex_tensors_reach_the_collectives_as_their_real_view(pool) -> None:
    case = Case(ranks=(RankSpec((2, 3)), RankSpec((1, 3))), dim=0, dtype="complex128", grad="sum")
    outcome = pool.run(case, "harness.ragged:gather_sum", repeat=False)
    assert outcome.fault is None and not outcome.errors, outcome
    entries = [entry for result in outcome.results for entry in result.collectives]
    assert any(entry.startswith("reduce_scatter") for entry in entries), f"no backward collective in {entries}"
    handed_complex = [entry for entry in entries if "complex" in entry]
    assert not handed_complex, f"collectives given complex tensors: {handed_complex}, but should get float64 views"


def test_gloo_reduce_scatters_every_dtype_a_gradient_travels_as(pool) -> None:
    caps = capabilities.measure(pool, "gloo", "cpu")
    gradient_dtypes = [name for name in caps.gather_dtypes() if name in DIFFERENTIABLE_DTYPES]
    lacking = {name: caps.cells[(CARRIED_AS.get(name, name), "reduce_scatter_tensor")] for name in gradient_dtypes
               if not caps.supports(CARRIED_AS.get(name, name), "reduce_scatter_tensor")}
    assert gradient_dtypes and not lacking, (
        f"gloo on this torch cannot reduce_scatter {lacking}: all_gather_ragged's sum/mean backward needs "
        f"another collective for them\n{caps.table()}")


def test_the_mean_gradient_of_a_complex_tensor_is_divided_part_by_part(pool) -> None:
    """At W=1 the mean gradient is the cotangent itself, bit for bit; torch 2.4 divides a complex
    tensor by a real scalar as complex division, which changes last bits even for 1 (the planted
    regression: ``cotangent / world`` instead of the part-wise division)."""
    case = Case(ranks=(RankSpec((64,), values="random", cotangent="floats"),), dtype="complex64", grad="mean")
    violations = check_outcome(pool.run(case, "harness.ragged:gather_mean", repeat=False))
    assert not violations, "\n\n".join(v.text() for v in violations)
