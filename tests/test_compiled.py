"""Compiled targets: a compile is never a hang, a compile slower than the budget is said as such,
and ``--compile`` finds a bug only the compiled code has, named so.

- The hang watch: a rank inside ``torch.compile`` (its ledger says so) is busy however idle it
  looks, up to ``COMPILE_PATIENCE`` times the timeout; then :class:`CompileTimeout`, exit 2
  naming ``--timeout``, never a hang of the target (a planted target that never leaves a compile).
- A rank's children count as its own in the watch's look (a compiler it waits for).
- A case in which the target compiled leaves torch's compile workers behind: no leak.
- A correct compiled funcol gather passes at the default timeout, on warm ranks that keep their
  compiles; the planted compile-only bug passes eagerly.  That it is found under ``--compile`` and
  named compile-only is ``docs/compiled.md``'s block, run as printed by ``tests/test_readme.py``
  (one search, not two: a compiled search is the suite's most expensive).
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.case import Case, RankSpec
from harness.core.contract import Contract
from harness.core.conventions import Call
from harness.core.errors import CompileTimeout
from harness.pool import forkserver
from harness.pool.watch import WINDOW_S, Watch, usage
from harness.report.text import finding_message
from harness.search.engine import run_check
from harness.settings.options import COMPILE_PATIENCE
from tests.budgets import CASE_TIMEOUT_S

PLANTED = "tests.planted.conventions"
ROOT = Path(__file__).resolve().parent.parent


def test_a_compiling_rank_gets_the_compile_budget_and_then_is_no_hang() -> None:
    idle = (1.0, False)  # asleep in a wait, no CPU: what a rank waiting on its compiler looks like
    watch = Watch(lambda r: idle, started=0.0, timeout_s=1.0, compiling=lambda ranks: True)
    assert watch.more_time([0], 1.0) == 1.0 + WINDOW_S  # the first look
    later = watch.more_time([0], 1.0 + WINDOW_S)
    assert later is not None and not watch.out_of_compile_time  # idle, yet compiling: more time
    assert not watch.settled([0], 2.0) and not watch.settled([0], 3.0)  # a peer's error does not end a compile
    assert watch.more_time([0], COMPILE_PATIENCE + 1.0) is None
    assert watch.out_of_compile_time and watch.verdict.startswith("still compiling after")


def test_an_idle_rank_that_is_not_compiling_is_still_a_hang() -> None:
    watch = Watch(lambda r: (1.0, False), started=0.0, timeout_s=1.0)
    watch.more_time([0], 1.0)
    assert watch.more_time([0], 1.0 + WINDOW_S) is None and not watch.out_of_compile_time


def test_a_busy_child_process_makes_its_rank_busy() -> None:
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        before = usage(os.getpid())
        time.sleep(0.5)
        after = usage(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert before is not None and after is not None
    assert after[1] and after[0] - before[0] > 0.1  # the child's CPU and state are its parent's


def test_a_compile_past_its_budget_is_a_compile_timeout_naming_the_flag(pool) -> None:
    started = time.monotonic()
    with pytest.raises(CompileTimeout, match=re.escape("give the compiler more time with --timeout SECONDS")):
        pool.run(Case(ranks=(RankSpec((2,)),) * 2), f"{PLANTED}:compiles_forever", call=Call(), timeout=0.2)
    assert time.monotonic() - started < 0.2 * COMPILE_PATIENCE + 60  # the budget (and a start), not the group's hour
    assert pool.run(Case(ranks=(RankSpec((2,)),) * 2), "harness.ragged:all_gather_ragged").fault is None  # healed


@pytest.mark.slow
def test_a_compiled_funcol_gather_passes_at_the_default_timeout(pool) -> None:
    contract = Contract(ragged=False, dtypes=("float32", "float64"), world_sizes=(1, 2))
    report = run_check(f"{ROOT}/examples/compiled.py:compiled_funcol_gather", contract, max_examples=20, timeout_s=CASE_TIMEOUT_S,
                       pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)
    assert not report.unattributed  # no hang put aside either: a compile is never one


@pytest.mark.slow  # a search of 20 examples (12 s): the full suite's, not the fast loop's
def test_the_same_target_passes_eagerly(pool) -> None:
    report = run_check(f"{ROOT}/examples/compiled.py:fast_path_when_compiled", Contract(ragged=False, dtypes=("float32",),
                       world_sizes=(2, 2)), max_examples=20, timeout_s=CASE_TIMEOUT_S, pool=pool)
    assert report.verdict == "pass", "\n\n".join(finding_message(f) for f in report.findings)


def test_a_command_that_compiles_forks_its_ranks_with_the_compiler_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--compile``: every fresh rank set of its check (a failing shrink step's, a replay's) starts
    with the compiler imported; any other command's forkserver does not import it."""
    def preloaded() -> list[str]:
        forkserver.context()
        return list(multiprocessing.forkserver._forkserver._preload_modules)  # type: ignore[attr-defined]

    assert preloaded() == forkserver.PRELOAD
    monkeypatch.setattr(forkserver, "_COMPILING", [True])
    compiling = preloaded()
    assert set(forkserver.COMPILER_PRELOAD) <= set(compiling) and compiling[-1] == forkserver.PRELOAD[-1]
    monkeypatch.undo()
    assert preloaded() == forkserver.PRELOAD


def test_a_compiled_call_says_so() -> None:
    call = Call(name="gather", compiled=True)
    assert call.describe() == "torch.compile(gather)(x, dim)"
    assert Contract(compile=True).describe().endswith(" compiled")
