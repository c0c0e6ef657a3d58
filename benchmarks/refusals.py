"""How long ``check`` takes to refuse what no rank needs to see: a wrong flag, a wrong signature, an import.

Run from the repository root::

    python benchmarks/refusals.py              # every refusal once
    python benchmarks/refusals.py --runs 3     # each three times: the slowest is reported

Each refusal is ``python -m harness check ...`` as a user types it (a fresh process, imports
included), timed from start to exit; each must exit 2 with its message.  Target (issue 51): each
within 5 s on a quiet 2-core box.  A plain function's signature is read off its source before any
rank starts (``harness.ranks.targets.static_signature``), under a decorator that keeps it
(``torch.no_grad()``, ``torch.compile``, ``functools.lru_cache``, ...) too; one the source does not
show exactly (a decorator of the module's own: the last row) is read where the target is imported,
on a rank, so that refusal includes starting one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness.report.text import markdown_table, text_table  # noqa: E402

TARGET_S = 5.0
#: name -> (the check's arguments, a word its message must hold)
REFUSALS: dict[str, tuple[list[str], str]] = {
    "unknown flag value": (["harness.ragged:all_gather_ragged", "--grad", "sideways"], "--grad"),
    "a flag of another collective": (["harness.ragged:reduce", "--collective", "reduce", "--src", "1"], "--src"),
    "a root no world drawn has": (["harness.ragged:reduce", "--collective", "reduce", "--dst", "3"], "--world-sizes"),
    "a max with a gradient contract": (["harness.ragged:reduce", "--collective", "reduce", "--op", "max", "--grad",
                                        "adjoint"], "ties"),
    "a target that cannot be imported": (["no_such_module_here:gather"], "cannot be found"),
    "a signature no convention fits": (["{tmp}/two_dims.py:gather"], "dim"),
    "the same, under @torch.no_grad() (read off its source)": (["{tmp}/two_dims.py:without_grad"], "dim"),
    "the same, under a decorator of its own (read on a rank)": (["{tmp}/two_dims.py:decorated"], "dim"),
}
TWO_DIMS = ("import functools\n\nimport torch\n\n\ndef gather(x, dim, seq_dim):\n    return x\n\n\n"
            "@torch.no_grad()\ndef without_grad(x, dim, seq_dim):\n    return x\n\n\n"
            "@functools.wraps(gather)\ndef decorated(x, dim, seq_dim):\n    return x\n")


def run_once(arguments: list[str], tmp: str) -> tuple[int, float, str]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness", "check", *(a.format(tmp=tmp) for a in arguments)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    return done.returncode, time.perf_counter() - started, done.stdout + done.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs of each refusal; the slowest is reported")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rows, met = [], True
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "two_dims.py"), "w") as f:
            f.write(TWO_DIMS)
        for name, (arguments, word) in REFUSALS.items():
            runs = [run_once(arguments, tmp) for _ in range(args.runs)]
            code, slowest = runs[0][0], max(seconds for _, seconds, _ in runs)
            said = all(word in text for _, _, text in runs) and all(c == 2 for c, _, _ in runs)
            ok = said and slowest <= TARGET_S
            met &= ok
            rows.append((name, f"exit {code}", f"{slowest:.1f} s", "met" if ok else
                         ("MISSED" if said else "WRONG REFUSAL: " + runs[0][2].strip().splitlines()[-1][:80])))
    print(f"gather-harness refusals, {args.runs} run(s) each, target <= {TARGET_S:g} s: "
          f"{'every target met' if met else 'TARGET MISSED'}")
    print((markdown_table if args.markdown else text_table)(("refusal", "exit", "slowest", "target"), rows))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
