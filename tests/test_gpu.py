"""CUDA and NCCL in the pool (marked ``gpu``; skipped, with the reason, where torch sees no GPU).

With one GPU: nccl at world size 1, gloo with CUDA tensors (every rank on ``cuda:0``) at 2.
The capability matrix comes from the GPU; a gather that hands nccl CPU tensors is a reported
failure of that gather, after which the pool heals.  ``tox -e gpu`` runs these.
"""

from __future__ import annotations

import pytest
import torch

from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome
from harness.core.contract import Contract
from harness.core.errors import PoolError
from harness.pool import capabilities
from harness.pool.machine import check_devices
from harness.pool.pool import LocalPool
from harness.report.text import finding_message
from harness.search.engine import run_check

DEVICE_RAGGED = "tests.planted.gpu_gathers:device_ragged"
EXAMPLES = 25


def nccl_case(world_size: int = 1) -> Case:
    return Case(ranks=tuple(RankSpec((n + 1, 2)) for n in range(world_size)), dim=0, backend="nccl", device="cuda")


def needs_gpu(test):
    """Marked ``gpu`` (``pytest -m gpu`` selects it) and skipped, saying why, where torch sees no GPU."""
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(),
                                              reason="needs a CUDA device; torch sees none")(test))


@needs_gpu
def test_nccl_at_world_size_1_passes_a_correct_gather(pool: LocalPool) -> None:
    contract = Contract(grad="sum", backends=("nccl",), devices=("cuda",), world_sizes=(1, 1))
    report = run_check("harness.ragged:gather_sum", contract, max_examples=EXAMPLES, timeout_s=30.0, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)


@needs_gpu
def test_gloo_with_cuda_tensors_at_world_size_2_passes(pool: LocalPool) -> None:
    contract = Contract(dtypes=("float32", "int64"), backends=("gloo",), devices=("cuda",), world_sizes=(2, 2))
    report = run_check(DEVICE_RAGGED, contract, max_examples=EXAMPLES, timeout_s=30.0, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)


@needs_gpu
def test_nccl_capabilities_are_measured_on_the_gpu(pool: LocalPool) -> None:
    caps = capabilities.measure(pool, "nccl", "cuda")
    # nccl refuses CPU tensors outright: an "ok" cell means the probe's tensors were on the GPU
    assert caps.supports("float32") and caps.supports("float32", "all_reduce"), caps.table()
    assert caps.table().startswith("nccl/cuda capabilities")
    assert caps.gather_dtypes()


@needs_gpu
def test_cpu_tensors_to_nccl_are_a_reported_failure_and_the_pool_heals(pool: LocalPool) -> None:
    outcome = pool.run(nccl_case(), "tests.planted.gpu_gathers:cpu_collective", timeout=30.0)
    violations = check_outcome(outcome)
    assert violations and {v.kind for v in violations} <= {"exception", "crash", "hang"}, violations
    healed = pool.run(nccl_case(), DEVICE_RAGGED, timeout=30.0)
    assert healed.fault is None and check_outcome(healed) == []


#: A planted fault on the last rank (the only one under nccl on one GPU), what it must be reported
#: as, and the function its stack or traceback must name.
NCCL_FAULTS = [
    ("tests.planted.faults:hang_last_rank", "hang", "in hang_last_rank"),
    ("tests.planted.faults:segfault_last_rank", "crash", "segfault_last_rank"),
    ("tests.planted.gpu_gathers:device_assert_last_rank", "exception", "device_assert_last_rank"),
]


@needs_gpu
@pytest.mark.parametrize("target, kind, named", NCCL_FAULTS, ids=[kind for _, kind, _ in NCCL_FAULTS])
def test_a_fault_under_nccl_is_reported_with_its_stack_and_the_pool_heals(pool: LocalPool, target: str, kind: str,
                                                                          named: str) -> None:
    """A hang, a crash and a device-side assert (which leaves the CUDA context unusable for good):
    each is reported as what it is, naming the planted frame, and the next case on the pool passes."""
    outcome = pool.run(nccl_case(), target, timeout=5.0)
    violations = check_outcome(outcome)
    assert kind in {v.kind for v in violations}, violations
    told = outcome.describe_fault() if outcome.fault else " ".join(r.error for r in outcome.errors)
    assert named in told, told
    healed = pool.run(nccl_case(), DEVICE_RAGGED, timeout=30.0)
    assert healed.fault is None and check_outcome(healed) == [], check_outcome(healed)


def test_nccl_needs_a_gpu_per_rank() -> None:
    """Runs everywhere: the pool refuses a set the machine cannot host, naming the reason."""
    count = torch.cuda.device_count()
    with pytest.raises(PoolError, match=f"needs {count + 1} GPUs, and torch sees {count}|sees no CUDA device"):
        check_devices("nccl", "cuda", count + 1)
    with pytest.raises(PoolError, match="needs device=cuda"):
        check_devices("nccl", "cpu", 1)
