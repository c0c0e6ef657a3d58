"""Standalone repro scripts: one runnable file per finding that needs nothing but torch.

A repro must still work where the harness is not installed (a bug report, another machine,
a GPU box), and it must run *exactly* what the harness ran.  So it embeds, as source text,
the harness's own case model, calling conventions, rank procedure, reference and checks
(:data:`EMBEDDED`: the same modules the harness runs, not a second implementation), loads
them as a private package, and on every rank runs the procedure and then the checks: the
companion input, the repeat call, the gradient contract and its tolerance, bits or values.
A history-dependent finding replays its history (the earlier cases on the same ranks) first.

It starts its own gloo group (``python repro.py``, on a port the OS picks) or joins one under
``torchrun``; every rank has a watchdog so that a hang ends.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import string
from pathlib import Path
from types import ModuleType

import torch

from harness import layers
from harness.report.text import finding_message
from harness.search.finding import Finding
from harness.settings import files
from harness.settings.options import DEFAULT_TIMEOUT_S


def _embedded() -> tuple[ModuleType, ...]:
    """Every module :func:`harness.layers.embedded` names: the core layer's, and the reference."""
    core = importlib.import_module(layers.package("core"))
    names = [core.__name__, *(f"{core.__name__}.{info.name}" for info in pkgutil.iter_modules(core.__path__)),
             *layers.PLACED]
    return tuple(importlib.import_module(name) for name in names if layers.embedded(name))


#: The modules a repro embeds (they import each other relatively, and only each other).
EMBEDDED: tuple[ModuleType, ...] = _embedded()


def write(finding: Finding, target: str, directory: str | os.PathLike, *, timeout_s: float = DEFAULT_TIMEOUT_S,
          misuse: bool = False) -> Path:
    """Write ``<directory>/<target>/<property>.py`` for ``finding``; return its absolute path.

    One script per target and property: a newer finding replaces the older script.

    - ``target``: the selector the finding came from; a file target is made absolute so the
      script runs from any directory, a module target is found via the current directory.
    - ``timeout_s``: seconds each rank may spend on the case before its watchdog ends it.
    - ``misuse``: the case is a misuse case, so raising on every rank is the right answer.
    """
    path = files.repro_path(directory, target, finding.property).resolve()
    files.write_atomically(path, render(finding, absolute_target(target), path.name, timeout_s, misuse))
    return path


def absolute_target(target: str) -> str:
    """``file.py:attr`` with an absolute file path; module targets unchanged."""
    module, _, attr = target.rpartition(":")
    return f"{os.path.abspath(module)}:{attr}" if module.endswith(".py") else target


def render(finding: Finding, target: str, name: str, timeout_s: float, misuse: bool) -> str:
    """The script's text (see :data:`_SCRIPT`)."""
    world = finding.case.world_size
    history = [{"case": case.to_dict(), "repeat": repeat} for case, repeat in finding.history]
    return _SCRIPT.substitute(
        headline=f"{finding.property} ({finding.kind}) of {target}",
        case_line=f"{finding.case.describe()}\n    called as {finding.call.describe(finding.case.passes_group)}",
        history_line=(f"\nIt fails only after {len(history)} earlier case(s) ran on the same ranks (the target keeps "
                      f"state between calls);\nthe script runs them first, as the harness did.\n") if history else "",
        torch_version=torch.__version__,
        name=name,
        world=world,
        message="\n".join(f"#   {line}".rstrip() for line in finding_message(finding).splitlines()),
        target=repr(target),
        sys_path=repr([os.getcwd()]),
        case_json=repr(finding.case.to_json()),
        history_json=repr(json.dumps(history)),
        call_json=repr(json.dumps(finding.call.to_dict())),
        repeat=repr(finding.repeat),
        bits=repr(finding.bits),
        property=repr(finding.property),
        misuse=repr(misuse),
        timeout_s=repr(float(timeout_s)),
        sources="\n".join(f"    {module.__name__!r}: ({hasattr(module, '__path__')}, {_literal(inspect.getsource(module))}),"
                          for module in EMBEDDED),
    )


def _literal(source: str) -> str:
    """``source`` as a readable triple-quoted literal that evaluates back to it exactly."""
    return "'''" + source.replace("\\", "\\\\").replace("'", "\\'") + "'''"


_SCRIPT = string.Template(r'''#!/usr/bin/env python3
r"""Repro: ${headline}

    ${case_line}
${history_line}
Written by gather-harness (torch ${torch_version}). Needs only torch: the harness's own case
model, calling conventions, rank procedure, reference and checks are embedded below, so every
rank runs exactly what the harness ran (the same calls, the companion input, the repeat call,
the gradient contract and tolerance) and is judged by exactly the same comparisons. Run either of

    python ${name}
    torchrun --standalone --nproc-per-node ${world} ${name}

The first starts ${world} local gloo rank processes itself, on a port the OS picks; under
torchrun (RANK and WORLD_SIZE set) each process runs as that one rank, joining with
init_method env://. Exit status 1 and "the failure reproduces": it does; 0: every rank
matched. A rank stuck for TIMEOUT_S seconds prints where it is stuck and exits 3.
"""
# What the harness saw:
${message}

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import json
import multiprocessing
import os
import signal
import socket
import sys
import threading
import traceback
import types

import torch
import torch.distributed as dist

TARGET = ${target}
SYS_PATH = ${sys_path}
CASE_JSON = ${case_json}
#: Cases the harness ran on the same ranks before this one (a history-dependent finding).
HISTORY_JSON = ${history_json}
CALL_JSON = ${call_json}
REPEAT = ${repeat}
BITS = ${bits}
PROPERTY = ${property}
#: True: the case is outside the variant's contract, and every rank raising is the right answer.
MISUSE = ${misuse}
TIMEOUT_S = ${timeout_s}
STARTUP_TIMEOUT_S = 120.0
#: Exit statuses of a rank: 0 matched, 1 a property broke, 3 stuck, 4 raised (right out of contract).
MATCHED, BROKE, STUCK, RAISED = 0, 1, 3, 4


def say(text: str) -> None:
    """Print ``text`` in one write, so the lines of ranks sharing a terminal never interleave."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main() -> int:
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        status = join_and_run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://")
        leave(0 if status in (MATCHED, RAISED) else status)
    return spawn_ranks()


def spawn_ranks() -> int:
    """Start one process per rank, wait for all, and judge by their exit statuses."""
    world = len(json.loads(CASE_JSON)["ranks"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        init_method = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    # fork: the ranks start with torch already imported (spawn re-imports it, seconds per rank)
    context = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    procs = [context.Process(target=rank_process, args=(r, world, init_method)) for r in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    codes = [proc.exitcode for proc in procs]
    for rank, code in enumerate(codes):
        if code is not None and code < 0:
            say(f"[no-hang-no-crash] rank {rank} died: killed by signal {signal.Signals(-code).name}")
        elif code not in (MATCHED, BROKE, STUCK, RAISED):
            say(f"[no-hang-no-crash] rank {rank} died: exited with status {code}")
    raised = [code == RAISED for code in codes]
    if MISUSE and any(raised) and not all(raised):
        say(f"[misuse] ranks {[r for r, up in enumerate(raised) if up]} raised but the others returned")
        failed = True
    else:
        failed = any(code not in (MATCHED, RAISED) for code in codes)
    verdict = "the failure reproduces" if failed else "not reproduced: every rank matched the reference"
    say(f"repro: {verdict} (the harness saw: {PROPERTY})")
    return 1 if failed else 0


def rank_process(rank: int, world: int, init_method: str) -> None:
    leave(join_and_run(rank, world, init_method))


def leave(status: int) -> None:
    """End this rank with ``status`` and without tearing its process group down.

    ``destroy_process_group`` (or the interpreter's teardown) right after a gloo collective can
    deadlock for good on torch 2.4 to 2.7 (fixed by pytorch#154976); nothing is left to save.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def join_and_run(rank: int, world: int, init_method: str) -> int:
    """Join the group, run the case on this rank, print what it found; the rank's exit status."""
    torch.set_num_threads(1)
    backend = json.loads(CASE_JSON)["backend"]
    startup = watchdog(STARTUP_TIMEOUT_S, rank, "joining the process group")
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    warm_up_autograd()
    startup.cancel()
    running = watchdog(TIMEOUT_S * (1 + len(json.loads(HISTORY_JSON))), rank, "the case")
    status = run_rank(rank, world)
    running.cancel()
    return status


def warm_up_autograd() -> None:
    """Autograd's first backward with a given cotangent imports for seconds (sympy): not the case's time."""
    leaf = torch.ones(1, requires_grad=True)
    torch.autograd.grad(leaf * 2, leaf, torch.ones(1))


def watchdog(seconds: float, rank: int, what: str) -> threading.Timer:
    """End this rank with its stack if ``what`` takes longer than ``seconds``: a hang must end."""

    def expire() -> None:
        stuck = sys._current_frames()[threading.main_thread().ident]
        say(f"[no-hang-no-crash] rank {rank}: {what} did not finish within {seconds:g} s; it is stuck in:\n"
              + "".join(traceback.format_stack(stuck)))
        os._exit(STUCK)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def run_rank(rank: int, world: int) -> int:
    """The harness's procedure on this rank (history first), then the harness's checks."""
    case = embedded("harness.core.case").Case.from_json(CASE_JSON)
    procedure, checks = embedded("harness.core.procedure"), embedded("harness.core.checks")
    if world != case.world_size:
        say(f"rank {rank}: this case needs {case.world_size} ranks, not {world}")
        return 2
    call = embedded("harness.core.conventions").Call(**json.loads(CALL_JSON))
    device = f"cuda:{rank % torch.cuda.device_count()}" if case.device == "cuda" else "cpu"
    sys.dont_write_bytecode = True
    try:
        target = load_target()
    except BaseException:
        say(f"rank {rank}: importing {TARGET} raised:\n{traceback.format_exc()}")
        return BROKE
    for earlier in json.loads(HISTORY_JSON):
        before = embedded("harness.core.case").Case.from_dict(earlier["case"])
        procedure.run_case(request(before, call, earlier["repeat"]), rank, target, device)
    result = procedure.run_case(request(case, call, REPEAT), rank, target, device)
    if MISUSE and result.error and result.error_phase == "forward":
        say(f"rank {rank}: raised, as it should on a misuse case: {result.error_line()}")
        return RAISED
    if MISUSE:
        violations = [] if result.idle else checks.check_misuse_result(case, result)
    else:
        violations = checks.check_result(case, result, bits=BITS)
    for violation in violations:
        say(violation.describe())
    if not violations:
        say(f"rank {rank}: {'idle (outside every group)' if result.idle else 'every property holds'}")
    return BROKE if violations else MATCHED


def request(case, call, repeat: bool):
    """The request the harness sent for ``case``: the same call, backward and repeat calls."""
    differentiable = case.grad != "none" and case.dtype in embedded("harness.core.contract").DIFFERENTIABLE_DTYPES
    return embedded("harness.core.procedure").RunRequest(case=case, target=TARGET, call=call, check_grad=differentiable,
                                        repeat=repeat and not MISUSE)


def load_target():
    """Import TARGET the way the harness's ranks do: a file by its path, a module by name."""
    sys.path[:0] = [path for path in SYS_PATH if path not in sys.path]
    module_name, _, attr = TARGET.rpartition(":")
    if module_name.endswith(".py"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(module_name)))  # as `python file.py`: siblings import
        spec = importlib.util.spec_from_file_location("gather_repro_target", module_name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    for part in attr.split("."):
        module = getattr(module, part)
    return module


PACKAGE = "gather_harness_repro"


def embedded(name: str) -> types.ModuleType:
    """The embedded harness module ``name`` (``harness.core.case``), imported from SOURCES as
    ``gather_harness_repro.case``: the modules import each other relatively, so they find each
    other there, in the harness's own folders, and never touch an installed ``harness`` a target
    may import."""
    if not any(isinstance(finder, EmbeddedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, EmbeddedFinder())
    return importlib.import_module(PACKAGE + name.removeprefix("harness"))


class EmbeddedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``gather_harness_repro.x.y`` from ``SOURCES["harness.x.y"]``; a package is one
    that is embedded as one or that holds embedded modules."""

    def find_spec(self, name, path=None, target=None):
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return None
        key = "harness" + name.removeprefix(PACKAGE)
        package = key == "harness" or any(other.startswith(key + ".") for other in SOURCES)
        if key not in SOURCES and not package:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=package or SOURCES[key][0])

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        key = "harness" + module.__name__.removeprefix(PACKAGE)
        if key in SOURCES:
            exec(compile(SOURCES[key][1], f"<embedded {key}>", "exec"), module.__dict__)


# The harness's own sources, embedded unchanged: module -> (is a package, source).
SOURCES = {
${sources}
}

if __name__ == "__main__":
    sys.exit(main())
''')
