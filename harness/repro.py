"""Standalone repro scripts: one runnable file per finding that needs nothing but torch.

A repro must still work where the harness is not installed (a bug report, another machine,
a GPU box), so it embeds the harness's case model (``harness/case.py``) and reference
(``reference/__init__.py``, plus the ``harness/contract.py`` it imports) as source text:
every rank rebuilds exactly the failing case's tensors and compares with exactly the rules
the harness used.  It starts its own gloo group (``python repro.py``, on a port the OS
picks) or joins one under ``torchrun``, and every rank has a watchdog so that a hang ends.
"""

from __future__ import annotations

import inspect
import os
import string
from pathlib import Path

import torch

from harness import case as case_module
from harness import contract as contract_module
from harness import files, reference
from harness.search import Finding


def write(finding: Finding, target: str, directory: str | os.PathLike, *, timeout: float = 10.0,
          out_of_contract: bool = False) -> Path:
    """Write ``<directory>/<target>/<property>.py`` for ``finding``; return its absolute path.

    One script per target and property: a newer finding replaces the older script.

    - ``target``: the selector the finding came from; a file target is made absolute so the
      script runs from any directory, a module target is found via the current directory.
    - ``timeout``: seconds each rank may spend on the case before its watchdog ends it.
    - ``out_of_contract``: the case is a misuse probe, so raising on every rank is the right answer.
    """
    path = files.repro_path(directory, target, finding.property).resolve()
    files.write_atomically(path, render(finding, absolute_target(target), finding.case.to_json(), path.name,
                                        timeout, out_of_contract))
    return path


def absolute_target(target: str) -> str:
    """``file.py:attr`` with an absolute file path; module targets unchanged."""
    module, _, attr = target.rpartition(":")
    return f"{os.path.abspath(module)}:{attr}" if module.endswith(".py") else target


def render(finding: Finding, target: str, case_json: str, name: str, timeout: float, out_of_contract: bool) -> str:
    """The script's text (see :data:`_SCRIPT`)."""
    world = finding.case.world_size
    return _SCRIPT.substitute(
        headline=f"{finding.property} ({finding.kind}) of {target}",
        case_line=finding.case.describe(),
        torch_version=torch.__version__,
        name=name,
        world=world,
        message="\n".join(f"#   {line}".rstrip() for line in finding.message.splitlines()),
        target=repr(target),
        sys_path=repr([os.getcwd()]),
        case_json=repr(case_json),
        property=repr(finding.property),
        out_of_contract=repr(out_of_contract),
        timeout=repr(float(timeout)),
        case_source=_literal(inspect.getsource(case_module)),
        contract_source=_literal(inspect.getsource(contract_module)),
        reference_source=_literal(inspect.getsource(reference)),
    )


def _literal(source: str) -> str:
    """``source`` as a readable triple-quoted literal that evaluates back to it exactly."""
    return "'''" + source.replace("\\", "\\\\").replace("'", "\\'") + "'''"


_SCRIPT = string.Template(r'''#!/usr/bin/env python3
r"""Repro: ${headline}

    ${case_line}

Written by gather-harness (torch ${torch_version}). Needs only torch: the harness's case model
and reference are embedded below, so every rank rebuilds exactly the failing case's tensors
and is judged by the harness's own rules. Run either of

    python ${name}
    torchrun --standalone --nproc-per-node ${world} ${name}

The first starts ${world} local gloo rank processes itself, on a port the OS picks; under
torchrun (RANK and WORLD_SIZE set) each process runs as that one rank, joining with
init_method env://. Every rank prints what it got against the reference: values bit for bit
with the first differing index, gradients within the harness's tolerance. Exit status 1: the
failure reproduces; 0: every rank matched. A rank stuck for TIMEOUT_S seconds prints where it is
stuck and exits 3.
"""
# What the harness saw:
${message}

from __future__ import annotations

import importlib
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
PROPERTY = ${property}
#: True: the case is outside the variant's contract, and every rank raising is the right answer.
OUT_OF_CONTRACT = ${out_of_contract}
TIMEOUT_S = ${timeout}
STARTUP_TIMEOUT_S = 120.0
#: A rank that raised breaks the property of the phase it raised in (as in harness/checks.py).
PHASE_PROPERTY = {"setup": "no-hang-no-crash", "forward": "values", "backward": "gradients", "repeat": "stable"}
#: Show whole tensors when they are at most this long.
SHOW_ELEMENTS = 32


def main() -> int:
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return join_and_run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://")
    return spawn_ranks()


def spawn_ranks() -> int:
    """Start one process per rank, wait for all, and sum up their exit statuses."""
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
    failed = False
    for rank, proc in enumerate(procs):
        code = proc.exitcode
        failed |= code != 0
        if code is not None and code < 0:
            print(f"[no-hang-no-crash] rank {rank} died: killed by signal {signal.Signals(-code).name}", flush=True)
        elif code not in (0, 1, 3):
            print(f"[no-hang-no-crash] rank {rank} died: exited with status {code}", flush=True)
    verdict = "the failure reproduces" if failed else "not reproduced: every rank matched the reference"
    print(f"repro: {verdict} (the harness saw: {PROPERTY})", flush=True)
    return 1 if failed else 0


def rank_process(rank: int, world: int, init_method: str) -> None:
    sys.exit(join_and_run(rank, world, init_method))


def join_and_run(rank: int, world: int, init_method: str) -> int:
    """Join the group, run the case on this rank, print the comparison; the exit status."""
    torch.set_num_threads(1)
    backend = json.loads(CASE_JSON)["backend"]
    startup = watchdog(STARTUP_TIMEOUT_S, rank, "joining the process group")
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    startup.cancel()
    running = watchdog(TIMEOUT_S, rank, "the case")
    status = run_rank(rank, world)
    dist.destroy_process_group()
    running.cancel()
    return status


def watchdog(seconds: float, rank: int, what: str) -> threading.Timer:
    """End this rank with its stacks if ``what`` takes longer than ``seconds``: a hang must end."""

    def expire() -> None:
        stuck = sys._current_frames()[threading.main_thread().ident]
        print(f"[no-hang-no-crash] rank {rank}: {what} did not finish within {seconds:g} s; it is stuck in:\n"
              + "".join(traceback.format_stack(stuck)), flush=True)
        os._exit(3)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def run_rank(rank: int, world: int) -> int:
    """Run the case on this rank and check every property the harness checks; 1 if one breaks."""
    model, contract, reference = embedded_harness()
    case = model.Case.from_json(CASE_JSON)
    if world != case.world_size:
        print(f"rank {rank}: this case needs {case.world_size} ranks, not {world}", flush=True)
        return 2
    check = RankCheck(rank, case)
    phase = "setup"
    try:
        gather = load_target()
        device = f"cuda:{rank % torch.cuda.device_count()}" if case.device == "cuda" else "cpu"
        with_grad = case.grad != "none" and case.dtype in contract.DIFFERENTIABLE_DTYPES
        x = model.make_input(case, rank, requires_grad=with_grad, device=device)
        stride = x.stride()
        expected = reference.expected_output(case)
        phase = "forward"
        y = gather(x, case.dim)
        first = y.detach().cpu().clone() if isinstance(y, torch.Tensor) else y
        check.output(y, expected)
        if OUT_OF_CONTRACT:
            return check.finish()
        if with_grad:
            phase = "backward"
            check.gradient(y, x, model.make_cotangent(case, rank, device=device),
                           reference.expected_grad(case, rank, case.grad), reference.within_bound)
        phase = "repeat"
        again = gather(x, case.dim)
        if not check.problems:
            check.bits("stable", "first output after a second call", y.detach().cpu(), expected)
            check.bits("repeatable", "second output", again.detach().cpu(), first)
        if x.stride() != stride:
            check.fail("inputs-untouched", f"input.stride()={x.stride()} changed by the call (was {stride})")
        check.bits("inputs-untouched", "input after the call", x.detach().cpu(), model.make_input(case, rank))
    except BaseException as exc:  # a variant may raise anything, SystemExit included
        check.raised(phase, exc)
    return check.finish()


class RankCheck:
    """What one rank saw: ``problems`` are broken properties, ``notes`` what matched."""

    def __init__(self, rank: int, case) -> None:
        self.rank, self.case = rank, case
        self.problems: list[str] = []
        self.notes: list[str] = []

    def fail(self, prop: str, text: str) -> None:
        prop = "misuse" if OUT_OF_CONTRACT else prop
        self.problems.append(f"[{prop}] rank {self.rank}: {text}")

    def output(self, y, expected: torch.Tensor) -> None:
        if not isinstance(y, torch.Tensor):
            self.fail("values", f"output is a {type(y).__name__}, but should be a Tensor")
            return
        if y.dtype != expected.dtype:
            self.fail("dtype", f"output.dtype={y.dtype}, but should be {expected.dtype}")
        elif y.shape != expected.shape:
            self.fail("shape", f"output.shape={tuple(y.shape)}, but should be {tuple(expected.shape)}")
        elif y.device.type != self.case.device:
            self.fail("device", f"output.device={y.device}, but should be {self.case.device}")
        else:
            self.bits("values", "output", y.detach().cpu(), expected)
            return
        self.show(y.detach().cpu(), expected)

    def bits(self, prop: str, what: str, got: torch.Tensor, want: torch.Tensor) -> None:
        """Raw-byte equality, so NaN payloads and the sign of zero count."""
        if got.dtype != want.dtype or got.shape != want.shape:
            self.fail(prop, f"{what}: {got.dtype} {tuple(got.shape)}, but should be {want.dtype} {tuple(want.shape)}")
            return
        same = bitwise_equal(got, want)
        if bool(same.all()):
            self.notes.append(f"{what} matches the reference bit for bit ({want.dtype}, shape {tuple(want.shape)})")
            return
        index = tuple(int(i) for i in (~same).nonzero()[0])
        self.fail(prop, f"{what}{list(index)}={element(got, index)}, but should be {element(want, index)}"
                        f" ({int((~same).sum())} of {same.numel()} elements differ)")
        self.show(got, want)

    def gradient(self, y, x: torch.Tensor, cotangent: torch.Tensor, want, within_bound) -> None:
        if not isinstance(y, torch.Tensor) or not y.requires_grad:
            raise TypeError("the output does not require grad: the variant is not differentiable")
        (grad,) = torch.autograd.grad(y, x, cotangent, allow_unused=True)
        rule = f"contract {self.case.grad}"
        if grad is None:
            self.fail("gradients", f"grad of x=None, but should be the gradient of {rule}")
            return
        grad = grad.detach().cpu()
        if grad.dtype != want.in_dtype.dtype or grad.shape != want.in_dtype.shape:
            self.fail("gradients", f"grad: {grad.dtype} {tuple(grad.shape)}, "
                                   f"but should be {want.in_dtype.dtype} {tuple(want.in_dtype.shape)}")
            return
        ok = within_bound(grad, want)
        if bool(ok.all()):
            self.notes.append(f"gradient matches {rule} (shape {tuple(grad.shape)})")
            return
        index = tuple(int(i) for i in (~ok).nonzero()[0])
        self.fail("gradients", f"grad{list(index)}={element(grad, index)}, but should be {element(want.in_dtype, index)}"
                               f" (±{float(want.bound[index]):.3g}; {rule})")
        self.show(grad, want.in_dtype)

    def raised(self, phase: str, exc: BaseException) -> None:
        last = "".join(traceback.format_exception_only(exc)).strip()
        if OUT_OF_CONTRACT and phase == "forward":
            self.notes.append(f"raised, as it should out of contract: {last}")
            return
        stack = "".join(traceback.format_exception(exc)).rstrip().replace("\n", "\n    ")
        self.fail(PHASE_PROPERTY[phase], f"raised in the {phase}: {last}\n    {stack}")

    def show(self, got: torch.Tensor, want: torch.Tensor) -> None:
        if got.numel() <= SHOW_ELEMENTS:
            self.problems.append(f"    got:      {got.tolist()}\n    expected: {want.tolist()}")

    def finish(self) -> int:
        lines = [f"rank {self.rank}: {note}" for note in self.notes] + self.problems
        print("\n".join(lines), flush=True)
        return 1 if self.problems else 0


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: are the raw bytes of ``a`` and ``b`` identical?"""
    size = a.element_size()
    a_bytes = a.contiguous().reshape(-1).view(torch.uint8).reshape(-1, size)
    b_bytes = b.contiguous().reshape(-1).view(torch.uint8).reshape(-1, size)
    return (a_bytes == b_bytes).all(dim=-1).reshape(a.shape)


def element(t: torch.Tensor, index: tuple) -> str:
    """One element and, for floats, its bits (NaN payloads and -0.0 show)."""
    value = t[index]
    text = repr(value.item())
    if t.is_floating_point() or t.is_complex():
        text += " (bits 0x" + value.reshape(1).view(torch.uint8).flip(0).numpy().tobytes().hex() + ")"
    return text


def load_target():
    """Import TARGET the way the harness's ranks do: a file by its path, a module by name."""
    sys.path[:0] = [path for path in SYS_PATH if path not in sys.path]
    module_name, _, attr = TARGET.rpartition(":")
    if module_name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("gather_repro_target", module_name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    for part in attr.split("."):
        module = getattr(module, part)
    return module


def embedded_harness() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """The case model, contract and reference modules, built from the sources below.

    The reference imports ``harness.case`` and ``harness.contract``: while it loads those
    names point at the embedded copies, then whatever they were is put back, so a target
    that imports the real ``harness`` package is unaffected.
    """
    model = _module("gather_repro_case", CASE_SOURCE)
    contract = _module("gather_repro_contract", CONTRACT_SOURCE)
    aliases = {"harness.case": model, "harness.contract": contract}
    saved = {name: sys.modules.get(name) for name in aliases}
    sys.modules.update(aliases)
    try:
        reference = _module("gather_repro_reference", REFERENCE_SOURCE)
    finally:
        for name, module in saved.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module
    return model, contract, reference


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up while a class is built
    exec(compile(source, f"<embedded {name}>", "exec"), module.__dict__)
    return module


# harness/case.py
CASE_SOURCE = ${case_source}

# harness/contract.py (the reference imports it)
CONTRACT_SOURCE = ${contract_source}

# reference/__init__.py
REFERENCE_SOURCE = ${reference_source}

if __name__ == "__main__":
    sys.exit(main())
''')
