"""A green you can trust: the widest contract the code accepts, and a wrong contract told from a bug.

- A target that takes a group is checked on subgroups unless ``--no-groups`` says otherwise: the
  subgroup bug that passed under the README's contrastive flags is found with them.
- A contract the probe shows wrong on every probe case is exit 2 with the flag that fits, before
  the search: ``--grad`` on a result that never requires grad, a reduce-scatter checked as a
  gather.  Behaviour that differs between cases stays a finding.
- A pass says when the gradient falls short of what a contrastive loss needs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import check_gather
from harness.core.errors import UsageError
from harness.pool.pool import LocalPool

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "tests.planted.contracts"


@pytest.mark.slow
def test_a_target_taking_a_group_is_checked_on_subgroups_by_default(pool: LocalPool) -> None:
    """The Lightning lineage's backward takes the global rank inside its group: found with the
    contrastive row's flags alone (no --groups), and hidden only when --no-groups says so."""
    target = "tests.planted.conventions:AllGatherWithGrad"
    with pytest.raises(AssertionError, match=r"gather check failed: gradients .* at W=2") as failed:
        check_gather(target, ragged=False, grad="sum", max_examples=100, seed=0)
    assert "groups={0}+{1}" in str(failed.value)
    assert "subgroups: cases pass group layouts" in str(failed.value)  # the header says which was done
    check_gather(target, ragged=False, grad="sum", groups=False, max_examples=40, seed=0)


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_the_default_subgroups_find_the_global_rank_bug_whatever_the_seed(pool: LocalPool, seed: int) -> None:
    """Seeds 0-1 here; ``benchmarks/subgroups.py --seeds 30`` is the sweep (every seed, and the
    examples each took)."""
    with pytest.raises(AssertionError, match="gather check failed: gradients"):
        check_gather("tests.planted.conventions:AllGatherWithGrad", ragged=False, grad="sum", seed=seed)


@pytest.mark.slow
def test_a_gradient_contract_on_a_non_differentiable_result_is_exit_2_in_seconds(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "check", f"{PLANTED}:gather_no_grad", "--grad", "sum"],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: --grad sum: the result of gather_no_grad(x, dim) requires grad on none of "
                                  "the probe's cases (W=1 and W=2, an input that requires grad)")
    assert "check it with --grad none" in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert time.monotonic() - started < 60  # seconds, not a search (the 10 s is measured in the README)
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # no repro, no database: nothing was searched


@pytest.mark.parametrize("target, grad", [("reduce_scatter_even", "none"), ("reduce_scatter_even_grad", "sum")])
def test_a_reduce_scatter_checked_as_a_gather_is_exit_2_naming_the_collective(pool: LocalPool, target: str,
                                                                               grad: str) -> None:
    with pytest.raises(UsageError, match=rf"^{target}\(x\) computes a reduce-scatter, not a gather: on the case "
                                         r"reduce-scatter\(sum\) W=2 .*, it returns each rank's slot of the sum; "
                                         r"check it with --collective reduce-scatter"):
        check_gather(f"{PLANTED}:{target}", grad=grad, max_examples=10)


@pytest.mark.parametrize("target, grad", [("reduce_scatter_even", "none"), ("reduce_scatter_even_grad", "adjoint")])
def test_the_flags_the_message_names_fit(pool: LocalPool, target: str, grad: str) -> None:
    """``--collective reduce-scatter --no-ragged``: the suggested contract passes the correct code."""
    check_gather(f"{PLANTED}:{target}", collective="reduce-scatter", ragged=False, grad=grad, max_examples=30, seed=0)


@pytest.mark.slow  # a search that finds and shrinks a failure: not the fast loop
def test_differentiable_on_some_cases_only_stays_a_finding(pool: LocalPool) -> None:
    """Exit 2 never hides a bug: a result that requires grad at W=1 and not at W=2 is searched, and
    the finding says why no gradient came back, without the harness's frames."""
    with pytest.raises(AssertionError, match="gather check failed: gradients") as failed:
        check_gather(f"{PLANTED}:differentiable_at_one_rank", ragged=False, grad="sum", max_examples=30, seed=0)
    text = str(failed.value)
    assert "grad of x=None (the output does not require grad, so no gradient flows back to x)" in text
    assert "harness/core/procedure.py" not in text


def test_a_local_gradient_passes_and_says_what_a_contrastive_loss_needs(pool: LocalPool) -> None:
    report = check_gather(f"{ROOT}/examples/gather_layer.py:GatherLayer", ragged=False, grad="local",
                          max_examples=30, seed=0)
    [note] = [note for note in report.notes if note.startswith("de facto gradient")]
    assert note.startswith("de facto gradient: local (what the gradients matched in all ") and "returned them" in note
    assert note.endswith("the contract you need is --grad sum, which this target does not deliver")
    assert report.to_json()["de_facto_gradient"] == "local"


def test_a_tensor_parallel_gather_of_activations_gets_no_contrastive_suggestion(pool: LocalPool) -> None:
    """It takes a group and keeps its own piece in the backward by design: nothing to suggest."""
    report = check_gather(f"{ROOT}/examples/tensor_parallel/mappings.py:gather_from_tensor_model_parallel_region",
                          ragged=False, grad="local", max_examples=30, seed=0)
    assert report.verdict == "pass" and report.to_json()["de_facto_gradient"] == "local"
    assert not [note for note in report.notes if "contrastive" in note]


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}
