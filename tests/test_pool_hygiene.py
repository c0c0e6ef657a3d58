"""No rank outlives its driver, however the driver ends (issue: pool, hygiene)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from harness.pool.pool import LocalPool

pytestmark = pytest.mark.slow  # drivers started and killed in subprocesses (about 10 s each)

#: The driver restores Python's Ctrl-C handler: a test suite started in the background by a shell
#: without job control (``(pytest &)``) inherits SIGINT ignored, and so would the driver.
DRIVER = textwrap.dedent(
    """
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from harness.core.case import Case, RankSpec
    from harness.pool.pool import LocalPool
    pool = LocalPool(timeout=30)
    case = Case(ranks=(RankSpec((2,)), RankSpec((1,)), RankSpec((0,))))
    assert pool.run(case, "tests.planted.faults:correct").fault is None
    pids = [p.pid for p in pool.rank_set("gloo", "cpu", 3).procs]
    print(" ".join(map(str, pids)), flush=True)
    if sys.argv[1] == "hang":
        pool.run(case, "tests.planted.faults:hang_rank1", timeout=100)  # busy when killed; no longer than the set outlasts
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between it and the read
        return False


def start_driver(mode: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, list[int]]:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, mode], stdout=subprocess.PIPE, text=True, env=env,
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
        # a driver ended before its exit handlers ran leaves its temporary directories, which the
        # next pool removes: this one, so the suite's last such test leaves none behind either
        LocalPool().close()


def test_normal_exit_leaves_nothing_running_when_it_returns(tmp_path) -> None:
    """Not seconds later: the moment the driver's process has exited, no process it started runs
    (ranks, the forkserver, multiprocessing's resource tracker: all carry the driver's environment).
    Output goes to a file: waiting for a pipe's end would wait for every process holding it."""
    mark = f"gather-test-{os.getpid()}-{time.monotonic_ns()}"
    script = DRIVER.replace("time.sleep(600)", "pass")
    with open(tmp_path / "out", "w") as out:
        driver = subprocess.run([sys.executable, "-c", script, "idle"], stdout=out, stderr=subprocess.STDOUT,
                                timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                env={**os.environ, "GATHER_TEST_MARK": mark})
    running = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if marked(pid, mark) and alive(pid)]
    assert driver.returncode == 0, (tmp_path / "out").read_text()
    assert running == [], [open(f"/proc/{pid}/cmdline").read() for pid in running if alive(pid)]


def marked(pid: int, mark: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"GATHER_TEST_MARK={mark}".encode() in handle.read()
    except OSError:
        return False


#: A gather whose rank 1 sleeps before it: a command checking it has its ranks up, and busy, for minutes.
SLEEPS_ON_RANK_1 = textwrap.dedent(
    """
    import time
    import torch
    import torch.distributed as dist

    def gather(x, dim):
        if dist.get_rank() == 1:
            time.sleep(600)
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, x.contiguous())
        return torch.cat(pieces, dim)
    """
)


def processes(mark: str) -> dict[int, tuple[int, bytes]]:
    """Every live process with ``mark`` in its environment: its parent's pid and its command line."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and alive(int(name)) and marked(int(name), mark):
            try:
                with open(f"/proc/{name}/stat") as stat, open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    found[int(name)] = (int(stat.read().split(")")[-1].split()[1]), cmdline.read())
            except OSError:
                continue
    return found


def test_a_command_lines_forkserver_is_forked_from_it_and_goes_with_it(tmp_path) -> None:
    """``python -m harness`` forks its rank forkserver from itself (torch imported once, not again by a
    new interpreter), and that server keeps none of the driver's descriptors but those passed to it:
    the driver killed outright, its alive pipe closes and the server and the ranks go."""
    (tmp_path / "sleeps.py").write_text(SLEEPS_ON_RANK_1)
    mark = f"forked-{os.getpid()}-{time.monotonic_ns()}"
    driver = subprocess.Popen([sys.executable, "-m", "harness", "check", "sleeps.py:gather", "--world-sizes", "2-2",
                               "--timeout", "60"], cwd=tmp_path, env={**os.environ, "GATHER_TEST_MARK": mark},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = processes(mark)
            servers = [pid for pid, (parent, line) in seen.items() if parent == driver.pid and line == seen[driver.pid][1]]
            if servers and sum(parent == servers[0] for parent, _ in seen.values()) >= 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no forked forkserver with two ranks within 60 s: {seen}")
        assert not [line for _, line in seen.values() if b"multiprocessing.forkserver" in line]  # no new interpreter
        driver.kill()
        driver.wait(timeout=30)
        assert wait_all_gone(list(seen)) == []
    finally:
        if driver.poll() is None:
            driver.kill()


def test_a_dead_drivers_temporary_directories_are_removed_by_the_next_pool(tmp_path) -> None:
    """Its ranks' directory and its forkserver's socket directory (what SIGKILL, or SIGTERM where nothing
    handles it, leaves); a live driver's are kept."""
    import tempfile

    from harness.pool import forkserver
    from harness.pool.pool import TMP_PREFIX

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = [tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{int(gone.stdout)}-"),
             tempfile.mkdtemp(prefix=f"{forkserver.SOCKET_PREFIX}{int(gone.stdout)}-", dir=forkserver.socket_base())]
    live = tempfile.mkdtemp(prefix=f"{forkserver.SOCKET_PREFIX}{os.getppid()}-", dir=forkserver.socket_base())
    try:
        (pool := LocalPool()).close()
        assert [path for path in stale if os.path.exists(path)] == []
        assert not os.path.exists(pool.tmpdir)
        assert os.path.isdir(live)
    finally:
        os.rmdir(live)


def test_a_driver_ended_by_sigterm_leaves_a_socket_directory_the_next_pool_removes(
        subprocess_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver, and the pool here that removes what it left, have a temporary directory of their
    own: in the system's, another xdist worker's pool could remove it before this test looks."""
    from harness.pool import forkserver

    monkeypatch.setattr(tempfile, "tempdir", subprocess_env["TMPDIR"])
    driver, pids = start_driver("idle", env=subprocess_env)
    try:
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=30)
        assert wait_all_gone(pids) == []
        left = [name for name in os.listdir(forkserver.socket_base())
                if name.startswith(f"{forkserver.SOCKET_PREFIX}{driver.pid}-")]
        assert left, "nothing to remove: the driver ran its exit handlers (this test plants nothing then)"
        LocalPool().close()
        assert not [name for name in left if os.path.exists(os.path.join(forkserver.socket_base(), name))]
    finally:
        if driver.poll() is None:
            driver.kill()


def test_a_leak_is_reported_and_a_correct_gather_has_none() -> None:
    from harness.core.contract import Contract
    from harness.search.engine import run_check

    contract = Contract(ragged=True, dims="any", grad="none", world_sizes=(1, 2))
    leaking = run_check("tests.planted.faults:leaks_thread", contract, max_examples=5)
    assert leaking.verdict == "pass" and leaking.leaks and "thread(s) still running" in leaking.leaks[0]
    assert run_check("tests.planted.faults:correct", contract, max_examples=5).leaks == []


def test_groups_a_target_makes_are_its_leak_and_the_harness_made_ones_are_not() -> None:
    """A process group made in the target is its leak (its ranks are replaced); one the catalogue's
    glue has the harness make (``harness.core.procedure.make_groups``, a 2-D mesh's other dimension) is not,
    so those ranks stay warm."""
    from harness.core.contract import Contract
    from harness.search.engine import run_check
    from harness.variants import by_name

    contract = Contract(ragged=True, dims="any", grad="none", world_sizes=(2, 2))
    leaking = run_check("tests.planted.faults:leaks_group", contract, max_examples=5)
    assert leaking.verdict == "pass" and any("file descriptor(s) open" in leak for leak in leaking.leaks)
    mesh = by_name("dtensor_mesh2d")
    report = run_check(mesh.target, mesh.contract.with_(world_sizes=(2, 4), dtypes=("float32",)), max_examples=12)
    assert report.verdict == "pass" and report.leaks == []


@pytest.mark.parametrize("long_tmpdir", [False, True], ids=["tmpdir", "tmpdir-too-long-for-a-socket"])
def test_a_command_leaves_nothing_in_the_temporary_directory(tmp_path, long_tmpdir: bool) -> None:
    """The forkserver's socket directory is removed at the command's (fast) exit, and a ``$TMPDIR``
    too long for a socket path is not an internal error (the socket goes in a short directory)."""
    tmpdir = tmp_path / ("t" * 90 if long_tmpdir else "t")
    tmpdir.mkdir()
    done = subprocess.run([sys.executable, "-m", "harness", "check", "harness.ragged:all_gather_ragged",
                           "--max-examples", "2", "--world-sizes", "1-2"], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmpdir)}, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [p.name for p in tmpdir.iterdir() if p.name.startswith("pymp-")]
