"""Scale-out on torchrun, on one machine: two ``torchrun`` invocations stand in for two nodes.

Both join one c10d rendezvous on a free loopback port and start ``harness.remote`` ranks
that dial a driver listening on another free port; everything runs on gloo/CPU.  Each test
stops its torchrun jobs and checks that no rank process is left.  Budget: about 15 s for
starting a job on a 2-core machine, a few seconds per search, 5 s for a torchrun restart.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path

import pytest

from harness.core.case import Case, RankSpec
from harness.core.checks import check_outcome
from harness.core.contract import Contract
from harness.core.errors import PoolError
from harness.frontends.commands import main
from harness.pool.remote_driver import RemotePool
from harness.ranks.remote_worker import AUTHKEY_ENV, worker_main
from harness.search.engine import run_check

pytestmark = pytest.mark.slow  # torchrun jobs (about 15 s to start one)

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
AUTHKEY = "test-remote-key"
CORRECT = "tests.planted.faults:correct"
JOB_TIMEOUT_S = 60.0
#: Shrinking a wrong answer at a fixed world size of 4 takes ~30 s over the sockets; finding it is the point.
SHRINK_S = 3.0
CASE = Case(ranks=(RankSpec((3, 2)), RankSpec((1, 2)), RankSpec((0, 2)), RankSpec((2, 2))), dim=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_nodes(driver: str, nproc: int, logs: Path, environ: dict[str, str],
                max_restarts: int = 0) -> list[subprocess.Popen]:
    """Two torchrun 'nodes' of ``nproc`` ranks each, serving the driver at ``driver``."""
    endpoint = f"127.0.0.1:{free_port()}"
    env = {**environ, AUTHKEY_ENV: AUTHKEY, "OMP_NUM_THREADS": "1"}
    nodes = []
    for node in (0, 1):
        command = [TORCHRUN, "--nnodes", "2", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", endpoint, "--rdzv-conf", f"is_host={int(node == 0)}",
                   "--max-restarts", str(max_restarts), "-m", "harness.remote", "--driver", driver,
                   "--connect-timeout", str(JOB_TIMEOUT_S)]
        log = open(logs / f"node{node}.log", "w")
        nodes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    return nodes


def finish(nodes: list[subprocess.Popen], timeout: float = 20.0) -> list[int | None]:
    """Wait for the torchrun jobs to end (the driver has stopped them); kill what is left."""
    codes = []
    for node in nodes:
        try:
            codes.append(node.wait(timeout))
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()
            codes.append(None)
    return codes


def assert_gone(pids: list[int], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.1)
    assert not alive, f"processes left behind: {alive}"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[1])


def test_a_torchrun_job_on_two_nodes_serves_the_driver(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """Cases run on the job's ranks, a correct gather passes, a planted bug is found, and a
    fault ends the set: torchrun restarts the ranks and the driver goes on with them."""
    pool = RemotePool("127.0.0.1:0", world_size=4, timeout=5.0, connect_timeout=JOB_TIMEOUT_S,
                      reconnect_timeout=JOB_TIMEOUT_S, authkey=AUTHKEY.encode(), announce=lambda text: None)
    nodes = start_nodes(pool.address, nproc=2, logs=tmp_path, environ=subprocess_env, max_restarts=2)
    pids: list[int] = []
    try:
        first = [res.value for res in pool.call(4, "os:getpid")]
        pids += first
        assert {parent_of(pid) for pid in first} == {node.pid for node in nodes}  # ranks of both 'nodes'

        passed = run_check(CORRECT, Contract(world_sizes=(4, 4), dtypes=("float32", "int64")), max_examples=12,
                           timeout_s=5.0, pool=pool)
        assert passed.verdict == "pass" and passed.examples == 12, passed.findings
        found = run_check("tests.planted.bugs:reversed_ranks", Contract(world_sizes=(4, 4)), max_examples=30,
                          timeout_s=5.0, pool=pool, shrink_budget_s=SHRINK_S)
        assert [f.property for f in found.findings] == ["values"], found.findings

        broken = pool.run(CASE, "tests.planted.faults:raise_rank1")
        assert broken.fault == "exception", broken
        report = broken.describe_fault()
        assert "ValueError: planted failure on rank 1" in report
        assert "rank 0 blocked in collective #1 all_gather" in report  # stack via the side channel
        assert "in correct" in report

        healed = pool.run(CASE, CORRECT)
        assert healed.fault is None and check_outcome(healed) == []
        assert pool.generation == 2
        pids += [res.value for res in pool.call(4, "os:getpid")]
    finally:
        pool.close()
        codes = finish(nodes)
    assert codes == [0, 0], (tmp_path / "node0.log").read_text()[-3000:]
    assert_gone(pids + [node.pid for node in nodes])


def test_check_listen_finds_a_bug_on_a_torchrun_job(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    """``check --listen``: the driver prints where to connect, the job's ranks run every case."""
    address_file = tmp_path / "driver"
    driver = subprocess.Popen(
        [sys.executable, "-m", "harness", "check", "tests.planted.bugs:reversed_ranks", "--listen", "127.0.0.1:0",
         "--address-file", str(address_file), "--world-sizes", "2", "--max-examples", "20", "--timeout", "5",
         "--connect-timeout", str(JOB_TIMEOUT_S), "--repro-dir", str(tmp_path), "--quiet"],
        cwd=ROOT, env={**os.environ, AUTHKEY_ENV: AUTHKEY}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    nodes: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while not address_file.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        nodes = start_nodes(address_file.read_text().strip(), nproc=1, logs=tmp_path, environ=subprocess_env)
        out, err = driver.communicate(timeout=JOB_TIMEOUT_S)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        codes = finish(nodes)
    assert driver.returncode == 1, err
    assert "property violated: values" in out and "W=2 gloo/cpu" in out, out
    assert "waiting for ranks on 127.0.0.1:" in err and "-m harness.remote --driver 127.0.0.1:" in err
    assert codes == [0, 0]
    assert_gone([node.pid for node in nodes])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--world-sizes", "1-4"], "give it as --world-sizes W"),
        (["--world-sizes", "2", "--backend", "nccl"], "add --device cuda"),
        (["--world-sizes", "2", "--listen", "nowhere"], "expected HOST:PORT"),
    ],
    ids=["a range of world sizes", "nccl on cpu", "no port"],
)
def test_listen_usage_errors_are_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["check", CORRECT, "--listen", "127.0.0.1:0", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_a_peer_with_another_key_is_turned_away() -> None:
    """The driver warns and keeps waiting; with no real rank it gives up naming its address."""
    warnings: list[str] = []
    with RemotePool("127.0.0.1:0", authkey=b"right", connect_timeout=1.5, announce=warnings.append) as pool:
        host, port = pool.address.rsplit(":", 1)
        refused: list[BaseException] = []
        stranger = threading.Thread(target=_dial_with, args=((host, int(port)), b"wrong", refused))
        stranger.start()
        with pytest.raises(PoolError, match=f"0 of the job's ranks connected to {pool.address} within 2 s"):
            pool.call(1, "os:getpid")
        stranger.join(5)
    assert any("differs from the driver's" in text for text in warnings), warnings
    assert refused and isinstance(refused[0], AuthenticationError)


def _dial_with(address: tuple[str, int], key: bytes, errors: list[BaseException]) -> None:
    try:
        Client(address, family="AF_INET", authkey=key).close()
    except BaseException as exc:  # the test thread reports it
        errors.append(exc)


def test_a_rank_outside_torchrun_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv("RANK", raising=False)
    assert worker_main(["--driver", "127.0.0.1:1"]) == 2
    assert "start harness.remote with torchrun" in capsys.readouterr().err
