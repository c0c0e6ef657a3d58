"""A search whose strata and Hypothesis draws run in batches judged on the ranks (``ahead``, the
default of ``check``) says what the same search case by case says: the same examples, coverage,
notes and gradient semantics when nothing fails, and the same findings, minimal cases and
``found_by`` when something does (:attr:`harness.search.engine.SearchSettings.ahead`)."""

from __future__ import annotations

import pytest
from hypothesis.database import InMemoryExampleDatabase

from harness.core.checks import IN_PLACE_NOTE
from harness.core.contract import Contract
from harness.search.engine import run_check
from harness.settings.profiles import ReadOnlyDatabase

#: Every test here runs two searches, and the failing ones shrink twice: not the fast loop.
pytestmark = pytest.mark.slow

PLANTED = "tests.planted"


def both(target: str, contract: Contract, **settings: object) -> tuple:
    """The report of ``target`` case by case, and in batches, with one seed."""
    return tuple(run_check(target, contract, seed=3, ahead=ahead, **settings) for ahead in (False, True))


def test_a_passing_search_in_batches_counts_covers_and_grades_what_the_usual_one_does() -> None:
    """Every case of a batch that passed counts as an example, in the coverage, and in the de facto
    gradient semantics, as a case judged on the driver does (the ranks say which contracts each
    case's gradients matched)."""
    contract = Contract(ragged=True, dims="any", grad="sum", world_sizes=(1, 3))
    usual, ahead = both("harness.ragged:all_gather_ragged", contract, max_examples=60, track_semantics=True)
    assert usual.verdict == ahead.verdict == "pass"
    assert ahead.examples == usual.examples == 60
    assert ahead.coverage.to_json() == usual.coverage.to_json()
    assert ahead.graded_cases == usual.graded_cases > 0 and ahead.de_facto == usual.de_facto
    assert ahead.notes == usual.notes


def test_an_in_place_write_in_a_batch_is_noted_as_case_by_case() -> None:
    contract = Contract(ragged=False, dims="any", grad="none", world_sizes=(1, 2))
    usual, ahead = both(f"{PLANTED}.bugs:writes_own_slot_in_place", contract, max_examples=30)
    assert usual.verdict == ahead.verdict == "pass"
    assert IN_PLACE_NOTE in usual.notes and IN_PLACE_NOTE in ahead.notes


@pytest.mark.parametrize(("target", "flags"), [
    (f"{PLANTED}.bugs:reversed_ranks", {}),  # a stratum meets it
    (f"{PLANTED}.bugs:local_only_backward", {"grad": "sum"}),
    (f"{PLANTED}.paths:zero_other_dim_crash", {}),
])
def test_a_finding_in_batches_is_the_usual_search_s_own(target: str, flags: dict) -> None:
    """A batch that fails is run again the usual way, which meets the failure where it would have,
    and shrinks it: the same property, minimal case and origin."""
    contract = Contract(ragged=True, dims="any", world_sizes=(1, 4)).with_(**flags)
    usual, ahead = both(target, contract, max_examples=100)
    assert [f.property for f in ahead.findings] == [f.property for f in usual.findings] != []
    assert [f.case for f in ahead.findings] == [f.case for f in usual.findings]
    assert [f.found_by for f in ahead.findings] == [f.found_by for f in usual.findings]


def test_drawing_ahead_replays_saved_failures_and_never_deletes_them() -> None:
    """The draws are collected by a test that passes everything: Hypothesis would take each saved
    failure for one fixed, and delete it."""
    inner = InMemoryExampleDatabase()
    inner.save(b"key", b"failure")
    read_only = ReadOnlyDatabase(inner)
    read_only.delete(b"key", b"failure")
    read_only.move(b"key", b"other", b"failure")
    read_only.save(b"key", b"new")
    assert list(read_only.fetch(b"key")) == [b"failure"] == list(inner.fetch(b"key"))
