"""No rank outlives its driver, however the driver ends (issue: pool, hygiene)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

DRIVER = textwrap.dedent(
    """
    import sys, time
    from harness.case import Case, RankSpec
    from harness.pool import Pool
    pool = Pool(timeout=30)
    case = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((0,))))
    assert pool.run(case, "tests.planted_faults:correct").fault is None
    pids = [p.pid for p in pool.rank_set("gloo", "cpu", 3).procs]
    print(" ".join(map(str, pids)), flush=True)
    if sys.argv[1] == "hang":
        pool.run(case, "tests.planted_faults:hang_rank1", timeout=600)  # ranks are busy when killed
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def start_driver(mode: str) -> tuple[subprocess.Popen, list[int]]:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), start_new_session=True)
    line = driver.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 3, line
    time.sleep(0.3)
    return driver, pids


def wait_all_gone(pids: list[int], limit_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        survivors = [pid for pid in pids if alive(pid)]
        if not survivors:
            return []
        time.sleep(0.1)
    return survivors


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
@pytest.mark.parametrize("mode", ["idle", "hang"])
def test_no_rank_survives_its_driver(how: signal.Signals, mode: str) -> None:
    driver, pids = start_driver(mode)
    try:
        driver.send_signal(how)
        driver.wait(timeout=30)
        assert wait_all_gone(pids) == []
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_normal_exit_leaves_no_rank() -> None:
    script = DRIVER.replace("time.sleep(600)", "pass")
    driver = subprocess.run([sys.executable, "-c", script, "idle"], capture_output=True, text=True, timeout=60,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert driver.returncode == 0, driver.stderr
    pids = [int(p) for p in driver.stdout.split()]
    assert wait_all_gone(pids, 5.0) == []
