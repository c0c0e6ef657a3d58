"""The launcher every finding script here shares: W gloo ranks on loopback, results back through a queue.

torch and the standard library only, so a script and this file are all a torch issue needs:
``launch(fn, world, *args)`` runs ``fn(rank, world, *args)`` on ``world`` spawned ranks.
A script whose path the installed torch does not have says so and exits 2 (:func:`not_applicable`).
With ``FINDINGS_DEVICE=cuda`` in the environment the ranks make their tensors on the GPU
(``torch.set_default_device``; still gloo, the one backend that puts several ranks on one GPU),
to tell which findings are CPU-only.
"""

import importlib
import os
import socket
import time
import traceback

import torch
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, fn, args, queue):
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        if os.environ.get("FINDINGS_DEVICE", "cpu") != "cpu":
            torch.set_default_device(os.environ["FINDINGS_DEVICE"])
        queue.put((rank, "ok", _on_cpu(fn(rank, world, *args))))
        dist.destroy_process_group()
    except BaseException as exc:  # report it to the parent instead of dying silently
        queue.put((rank, "error", "".join(traceback.format_exception_only(type(exc), exc)).strip()))


def _on_cpu(value):
    """``value`` with its tensors moved to the CPU, to cross the queue (CUDA tensors would not)."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _on_cpu(v) for k, v in value.items()}
    return value


def launch(fn, world, *args, timeout=45.0):
    """Run fn(rank, world, *args) on `world` spawned ranks; {rank: (status, value)}.

    A rank that does not report within `timeout` seconds is killed and reported as "hang".
    """
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, world, port, fn, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results, deadline = {}, time.monotonic() + timeout
    while len(results) < world and time.monotonic() < deadline:
        if not queue.empty():
            rank, status, value = queue.get()
            results[rank] = (status, value)
        elif all(not p.is_alive() for p in procs) and queue.empty():
            break
        else:
            time.sleep(0.02)
    for rank, p in enumerate(procs):
        p.join(timeout=2.0)
        if p.is_alive():  # only the processes this script started
            p.kill()
            p.join()
            results.setdefault(rank, ("hang", f"no report within {timeout:.0f} s"))
        results.setdefault(rank, ("dead", f"exit code {p.exitcode}"))
    return results


def reported(results, indent=""):
    """Each rank that reported, as (rank, value); the others' status (an error, a hang) is printed."""
    for rank in sorted(results):
        status, value = results[rank]
        if status == "ok":
            yield rank, value
        else:
            print(f"{indent}rank {rank}: {status}: {value}")


def outcomes(calls, x, expected):
    """{name: "OK", "WRONG [...]" or "RuntimeError: ..."}: each ``call(x)`` judged against ``expected``."""
    out = {}
    for name, call in calls.items():
        try:
            got = call(x)
            out[name] = "OK" if torch.equal(got, expected) else f"WRONG {got.tolist()}"
        except RuntimeError as exc:
            out[name] = f"RuntimeError: {str(exc).splitlines()[0][:120]}"
    return out


def print_outcomes(results):
    """Print what each rank expected and every call's outcome (``work`` returned ``{"expected",
    "results": outcomes(...)}``); True when some call was not OK or some rank did not report."""
    reproduced = any(status != "ok" for status, _ in results.values())
    for rank, value in reported(results):
        print(f"rank {rank}: expected {value['expected']} from every call")
        for name, verdict in value["results"].items():
            print(f"   {name:58s} actual: {verdict}")
            reproduced |= verdict != "OK"
    return reproduced


def print_verdicts(results, line, indent=""):
    """Print every verdict of the ranks that reported ``{name: "OK" or what went wrong}``, one
    ``line(rank, name, verdict)`` each; True when some verdict was not OK or some rank did not report."""
    reproduced = any(status != "ok" for status, _ in results.values())
    for rank, verdicts in reported(results, indent=indent):
        for name, verdict in verdicts.items():
            print(line(rank, name, verdict))
            reproduced |= verdict != "OK"
    return reproduced


def lacking(*names):
    """Which of ``names`` ("torch.distributed.all_gather_single", "module:Class.attr") this torch lacks."""
    absent = []
    for name in names:
        module_name, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
        try:
            obj = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            absent.append(name.replace(":", "."))
    return absent


def not_applicable(absent):
    """The last line and exit status (2) of a script whose path this torch does not have: not a reproduction."""
    print(f"\nnot applicable: torch {torch.__version__} has no {', '.join(absent)}")
    return 2


def conclude(reproduced):
    """The last line and the exit status every script here ends with: 1 when the bug reproduced."""
    print("\nREPRODUCED" if reproduced else "\nnot reproduced")
    return 1 if reproduced else 0
