"""Every property of BRIEF §4 holds for our own ragged gather, drawn by Hypothesis in pytest.

These are plain ``@given`` tests over the session's warm pool, so the active profile
(``ci`` under ``CI=true``) sets the budget and ``--hypothesis-show-statistics`` shows the
coverage events (world size, dtype, dim sign, empty ranks, layouts, value classes).  Each
property family is its own test, so a regression names the property that broke.
"""

from __future__ import annotations

import pytest
from harness.strategies import space
from hypothesis import event, given, note
from hypothesis import strategies as st

from harness import strategies
from harness.core.checks import check_outcome
from harness.core.compare import Violation
from harness.core.contract import Contract
from harness.variants.specs import GLOO_DTYPES

pytestmark = pytest.mark.slow  # Hypothesis over ranks, one search per property (5-12 s each)

FAMILIES: dict[str, tuple[str, ...]] = {
    "values": ("no-hang-no-crash", "dtype", "shape", "device", "values"),
    "inputs-untouched": ("inputs-untouched",),
    "gradients": ("gradients",),
    "stable-and-repeatable": ("stable", "repeatable"),
}
TARGETS = {"sum": "harness.ragged:gather_sum", "local": "harness.ragged:gather_local", "mean": "harness.ragged:gather_mean"}


def run_and_check(pool, case, grad: str) -> list[Violation]:
    for label in space.events(case):
        event(label)
    outcome = pool.run(case, TARGETS[grad])
    violations = check_outcome(outcome)
    for v in violations:
        note(v.describe())
    return violations


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("grad", list(TARGETS))
@given(data=st.data())
def test_ours_satisfies(pool, grad: str, family: str, data: st.DataObject) -> None:
    case = data.draw(strategies.cases(contract=Contract(grad=grad, dtypes=GLOO_DTYPES)), label="case")
    broken = [v for v in run_and_check(pool, case, grad) if v.property in FAMILIES[family]]
    assert not broken, "\n".join(v.describe() for v in broken)
