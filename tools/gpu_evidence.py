"""Every GPU check of the harness in one run that fits a small device budget, with a CPU dry run.

    python -m pip install --no-deps --no-build-isolation -e .   # once, into the CUDA torch's environment
    python tools/gpu_evidence.py --device cuda --out DIR     # on a GPU machine (about 6 minutes)
    python tools/gpu_evidence.py --device cpu --out DIR      # here: the same steps on gloo/CPU

Each step is a command of its own: its output goes to ``DIR/<step>.log``, a one-line summary
(status, exit code, seconds, the line that matters) to stdout and ``DIR/summary.txt``, and
every step runs whatever the others did.  Steps run in lanes side by side (a GPU machine has
cores to spare; one GPU serves them all), each under its own ``timeout``, so the whole run
ends within :data:`BUDGET_S`.  Every command runs in ``DIR/work``: the example databases,
repro scripts and JSON files it writes stay there, never in the checkout.

On ``--device cpu`` the nccl steps run gloo on CPU tensors at the same world size, and the
findings scripts run on CPU tensors: every command line, path and parser is the one the GPU
run uses.  The exit status is 0 when every step ended as it should (a planted bug found, a
correct gather passed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The whole run's wall-clock budget: the issue's 7 minutes on the GPU machine.
BUDGET_S = 420.0
HARNESS = [sys.executable, "-m", "harness"]
#: The lane of timings, run before the others start: measured beside the other lanes (a report,
#: two fuzz runs and the findings scripts on the same GPU and cores), one call of our gather on
#: 65536 floats took 16.7 ms on an H100 where it takes 0.66 ms alone.
ALONE = "alone"
CORRECT = "harness.ragged:all_gather_ragged"
#: Catalogue variants checked on CUDA by ``report``: ours, the published gathers whose known
#: flaws are about layouts and gradients (gloo's storage order on CPU: do they show on CUDA?),
#: and one of each neighbour.  Each finishes in seconds.
REPORT_VARIANTS = ("ours_sum,ours_local,plain_all_gather,simclr_gather_layer,torch_nn_all_gather,"
                   "all_gather_into_tensor,all_gather_into_tensor_stack,funcol_all_gather_tensor,"
                   "rs_reduce_scatter_tensor,rs_nn_reduce_scatter,a2a_all_to_all_single,ours_all_to_all")
OURS = "ours_sum,ours_local,ours_mean,ours_reduce_scatter_sum,ours_reduce_scatter_mean,ours_reduce_scatter_max," \
       "ours_all_to_all"


@dataclass(frozen=True)
class Where:
    """A backend/device pairing and its world sizes: nccl at W=1 (one GPU), gloo with CUDA tensors at 1-4."""

    backend: str
    device: str
    world_sizes: str

    def options(self) -> list[str]:
        return ["--backend", self.backend, "--device", self.device, "--world-sizes", self.world_sizes]

    @property
    def tag(self) -> str:
        """In step names: ``nccl-cuda-w1``, ``gloo-cuda-w1-4``."""
        return f"{self.backend}-{self.device}-w{self.world_sizes}"


@dataclass(frozen=True)
class Step:
    """One command; ``want`` its exit statuses that mean the step did its job, ``must_say`` a
    pattern its output must contain (the kind of a planted fault, say), ``digest`` the summary
    of what it printed."""

    name: str
    lane: str
    argv: list[str]
    timeout: float
    want: tuple[int, ...] = (0,)
    must_say: str = ""
    digest: Callable[[str, Path], str] | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    step: Step
    rc: int | None
    seconds: float
    line: str

    @property
    def ok(self) -> bool:
        said = not self.step.must_say or re.search(self.step.must_say, self.line) is not None
        return self.rc in self.step.want and said

    def summary(self) -> str:
        rc = "timeout" if self.rc is None else f"rc={self.rc}"
        want = "/".join(map(str, self.step.want))
        return f"[{'ok' if self.ok else 'FAIL'}] {self.step.name:<26} {rc} (want {want}) {self.seconds:6.1f} s  {self.line}"


# -- what each step's output says ---------------------------------------------------------------------


def last_line(text: str, _: Path) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def verdict_line(text: str, _: Path) -> str:
    """``PASS: ...`` or ``FAIL: ...`` and, for a failure, the property and the minimal case."""
    picked = [line.strip() for line in text.splitlines()
              if line.startswith(("PASS", "FAIL", "property violated", "case:", "error", "harness error"))]
    return " | ".join(picked[:4]) or last_line(text, _)


def fuzz_digest(text: str, work: Path, json_name: str) -> str:
    """Examples, seconds and examples/s of a fuzz run, from its JSON summary."""
    try:
        summary = json.loads((work / json_name).read_text())
    except (OSError, ValueError) as exc:
        return f"no summary ({exc}); {last_line(text, work)}"
    rate = summary["examples"] / summary["elapsed_s"] if summary["elapsed_s"] else 0.0
    targets = ", ".join(f"{t['name']} {t['status']} {t['examples']}" for t in summary["targets"])
    return (f"{summary['verdict']}: {summary['examples']} examples in {summary['elapsed_s']:.0f} s = {rate:.1f}/s "
            f"on {summary['backend']}/{summary['device']} ({targets}); found {summary['found']}")


def pytest_digest(text: str, work: Path) -> str:
    counts = [line.strip("= ") for line in text.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", line)]
    return counts[-1] if counts else last_line(text, work)


def report_digest(text: str, work: Path) -> str:
    """The verdict of each variant (``name verdict``) and the capability matrix's heading."""
    verdicts = re.findall(r"^(\w+)\s+.+?\s{2,}(pass|fail|error|unavailable|intermittent)\b", text, re.MULTILINE)
    heading = next((line for line in text.splitlines() if " capabilities, torch " in line), "no capability matrix")
    return f"{', '.join(f'{name} {verdict}' for name, verdict in verdicts)}; {heading}"


def findings_digest(text: str, work: Path) -> str:
    """How many finding scripts reproduced (exit 1), did not (0), or do not apply (2)."""
    codes = re.findall(r"^(\S+\.py) rc=(\S+)", text, re.MULTILINE)
    by_code: dict[str, list[str]] = {}
    for script, code in codes:
        by_code.setdefault(code, []).append(script.removesuffix(".py"))
    meaning = {"1": "reproduced", "0": "not reproduced", "2": "not applicable"}
    return "; ".join(f"{meaning.get(code, 'rc=' + code)}: {len(names)}" for code, names in sorted(by_code.items()))


# -- the steps -----------------------------------------------------------------------------------------


def steps(gpu: bool, fuzz_seconds: float) -> list[Step]:
    """Every step, nccl standing in for gloo on CPU tensors in the dry run."""
    device = "cuda" if gpu else "cpu"
    single = Where("nccl" if gpu else "gloo", device, "1")
    shared = Where("gloo", device, "1-4")
    check = [*HARNESS, "check"]
    budget = ["--max-examples", "40", "--seed", "0"]

    def planted(name: str, target: str, where: Where, extra: list[str], must_say: str, timeout: float = 120) -> Step:
        return Step(name, "planted", [*check, target, *where.options(), *budget, *extra], timeout, want=(1,),
                    must_say=must_say, digest=verdict_line)

    return [
        Step("environment", "main", [sys.executable, "-c", ENVIRONMENT], 60, digest=last_line),
        Step("pytest-gpu", "main", [sys.executable, "-m", "pytest", "-m", "gpu", str(ROOT / "tests" / "test_gpu.py"),
                                    "-q", "-rs", "-p", "no:cacheprovider", f"--rootdir={ROOT}"], 200,
             digest=pytest_digest),
        Step("raw-collectives", ALONE, [sys.executable, "-c", RAW, single.backend, device], 90, digest=last_line),
        Step("capabilities", "main", [sys.executable, "-c", CAPABILITIES, single.backend, device, shared.backend],
             90, digest=last_line),
        Step(f"check-ours-{single.tag}", "main", [*check, CORRECT, *single.options(), "--grad", "sum", *budget,
                                                      "--json", "check-single.json"], 120, digest=verdict_line),
        Step(f"check-ours-{shared.tag}", "main", [*check, CORRECT, *shared.options(), "--grad", "sum", *budget,
                                                      "--json", "check-shared.json"], 150, digest=verdict_line),
        planted(f"values-{single.tag}", "tests.planted.bugs:ignores_strides", single, [], "values"),
        planted(f"gradients-{single.tag}", "tests.planted.bugs:contiguous_cotangent_only", single,
                ["--grad", "sum"], "gradients"),
        planted(f"hang-{single.tag}", "tests.planted.faults:hang_last_rank", single, ["--timeout", "2"], r"\(hang\)"),
        planted(f"crash-{single.tag}", "tests.planted.faults:segfault_last_rank", single, [], r"\(crash\)"),
        planted(f"device-assert-{single.tag}", "tests.planted.gpu_gathers:device_assert_last_rank", single, [],
                "exception"),
        planted(f"values-{shared.tag}", "tests.planted.bugs:reversed_ranks", shared, [], "values"),
        planted(f"gradients-{shared.tag}", "tests.planted.bugs:local_only_backward", shared, ["--grad", "sum"],
                "gradients"),
        Step(f"report-{shared.tag}", "catalogue", [*HARNESS, "report", *shared.options(), "--variants",
                                                       REPORT_VARIANTS, "--max-examples", "30", "--json",
                                                       "report-shared.json"], 180, digest=report_digest),
        Step(f"report-{single.tag}", "catalogue", [*HARNESS, "report", *single.options(), "--variants",
                                                       REPORT_VARIANTS, "--max-examples", "20", "--json",
                                                       "report-single.json"], 240, digest=report_digest),
        Step("findings", "catalogue", [sys.executable, "-c", FINDINGS, str(ROOT / "docs" / "findings")], 200,
             env={"FINDINGS_DEVICE": device}, digest=findings_digest),
        fuzz_step(shared, fuzz_seconds, "fuzz-shared.json", ["--variants", OURS]),
        fuzz_step(single, fuzz_seconds, "fuzz-single.json", ["--variants", OURS]),
        # a finding made on this device, whose JSON the replay --on-cpu step reads back on a CPU machine
        fuzz_step(single, 30, "fuzz-finding.json", ["tests.planted.bugs:float64_to_float32"], want=(1,)),
    ]


def fuzz_step(where: Where, seconds: float, json_name: str, what: list[str], want: tuple[int, ...] = (0,)) -> Step:
    name = f"fuzz-{where.tag}" if what[0] == "--variants" else f"fuzz-finding-{where.tag}"
    argv = [*HARNESS, "fuzz", *what, *where.options(), "--duration", f"{seconds:g}", "--seed", "0", "--json",
            json_name, "--database", f"db-{json_name}", "--quiet"]
    return Step(name, "fuzz", argv, seconds + 90, want=want,
                digest=lambda text, work: fuzz_digest(text, work, json_name))


ENVIRONMENT = """
import platform, shutil, subprocess, torch, torch.distributed as dist
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)
print("gloo", dist.is_gloo_available(), "nccl", dist.is_nccl_available())
if torch.cuda.is_available():
    print("nccl version", ".".join(map(str, torch.cuda.nccl.version())))
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"cuda:{i}", p.name, f"{p.total_memory / 2**30:.0f} GiB", f"sm_{p.major}{p.minor}")
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip())
print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "(no GPU)")
"""

RAW = """
import os, sys, time, torch, torch.distributed as dist
from harness.ragged import all_gather_ragged
backend, device = sys.argv[1:]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29511")
dist.init_process_group(backend, rank=0, world_size=1)
where = torch.device(device, 0) if device == "cuda" else torch.device("cpu")
def sync():
    if where.type == "cuda":
        torch.cuda.synchronize(where)
def per_call(call, repeats=2000):
    for _ in range(50):
        call()
    sync()
    started = time.perf_counter()
    for _ in range(repeats):
        call()
        sync()
    return (time.perf_counter() - started) / repeats * 1e6
parts = []
for numel in (64, 65536):
    x = torch.arange(numel, dtype=torch.float32, device=where)
    out = torch.empty(numel, dtype=torch.float32, device=where)
    raw = per_call(lambda: dist.all_gather_into_tensor(out, x))
    ours = per_call(lambda: all_gather_ragged(x, 0))
    leaf = x.clone().requires_grad_()
    both = per_call(lambda: all_gather_ragged(leaf, 0).sum().backward())
    parts.append(f"{numel} float32: all_gather_into_tensor {raw:.1f} us, all_gather_ragged {ours:.1f} us, "
                 f"with its backward {both:.1f} us")
dist.destroy_process_group()
print(f"one call at W=1 on {backend}/{device}, synchronized: " + "; ".join(parts))
"""

CAPABILITIES = """
import sys
from harness import capabilities
from harness.pool.pool import shared_pool
single, device, shared = sys.argv[1:]
pool = shared_pool()
tables = [capabilities.measure(pool, backend, device) for backend in dict.fromkeys([single, shared])]
for caps in tables:
    print(caps.table(), end="\\n\\n")
print("; ".join(f"{c.backend}/{c.device} gathers {len(c.gather_dtypes())} dtypes: {','.join(c.gather_dtypes())}"
                for c in tables))
"""

FINDINGS = """
import subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
scripts = sorted(p for p in Path(sys.argv[1]).glob("*.py") if not p.name.startswith("_"))
def run(path):
    try:
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=90)
        code, text = str(done.returncode), done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, text = "timeout", str(exc)
    print(f"--- {path.name} rc={code}\\n{text.rstrip()}\\n", flush=True)
    return path.name, code
with ThreadPoolExecutor(8) as workers:
    ran = list(workers.map(run, scripts))
for name, code in ran:
    print(f"{name} rc={code}")
"""


# -- running them ----------------------------------------------------------------------------------------


def run_step(step: Step, out: Path, work: Path, deadline: float) -> Result:
    """Run ``step`` in its own process group (its ranks die with it on a timeout); never raises."""
    log = out / f"{step.name}.log"
    timeout = max(1.0, min(step.timeout, deadline - time.monotonic()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "PYTHONUNBUFFERED": "1", **step.env}
    started = time.monotonic()
    with log.open("w") as sink:
        sink.write(f"$ {shlex.join(step.argv)}\n\n")
        sink.flush()
        try:
            process = subprocess.Popen(step.argv, cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            return Result(step, -1, 0.0, f"could not start: {exc}")
        try:
            rc: int | None = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            _kill_group(process.pid)
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    try:
        line = (step.digest or last_line)(text, work)
    except Exception as exc:  # noqa: BLE001 - a digest that cannot read the output is reported, not raised
        line = f"could not read the output ({type(exc).__name__}: {exc}); {last_line(text, work)}"
    if rc is None:
        line = f"killed after {timeout:.0f} s; {line}"
    return Result(step, rc, seconds, line)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_all(chosen: list[Step], out: Path) -> list[Result]:
    """Run the :data:`ALONE` lane first, then the other lanes side by side, each lane's steps one
    after the other; print each summary as it ends."""
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + BUDGET_S
    lanes: dict[str, list[Step]] = {}
    for step in chosen:
        lanes.setdefault(step.lane, []).append(step)
    printing = threading.Lock()

    def lane(members: list[Step]) -> list[Result]:
        results = []
        for step in members:
            result = run_step(step, out, work, deadline)
            with printing:
                print(result.summary(), flush=True)
            results.append(result)
        return results

    finished = lane(lanes.pop(ALONE, []))
    with ThreadPoolExecutor(max(1, len(lanes))) as workers:
        finished += [result for ran in workers.map(lane, lanes.values()) for result in ran]
    order = {step.name: i for i, step in enumerate(chosen)}
    return sorted(finished, key=lambda result: order[result.step.name])


INSTALL = "python -m pip install --no-deps --no-build-isolation -e ."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda: the GPU run; cpu: the dry run, nccl steps on gloo/CPU (default: cuda)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-evidence")),
                        help="where the logs go (default: $OUT, else ./gpu-evidence)")
    parser.add_argument("--only", metavar="a,b", help="only these steps (after a fix: rerun what failed)")
    parser.add_argument("--fuzz-seconds", type=float, default=60.0, help="each fuzz run's duration (default: 60)")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("harness.reference") is None:  # installed as harness.* (pyproject's package-dir)
        parser.error(f"the project is not installed in this environment: run `{INSTALL}` in {ROOT} first")
    every = steps(args.device == "cuda", args.fuzz_seconds)
    chosen = every
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {step.name for step in every}
        if unknown:
            parser.error(f"--only: no step {', '.join(sorted(unknown))} (steps: {', '.join(s.name for s in every)})")
        chosen = [step for step in every if step.name in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = run_all(chosen, args.out)
    lines = [result.summary() for result in results]
    failed = [result.step.name for result in results if not result.ok]
    lines.append(f"{len(results) - len(failed)} of {len(results)} steps ok in {time.monotonic() - started:.0f} s"
                 + (f"; failed: {', '.join(failed)}" if failed else ""))
    (args.out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
