"""What checking compiled code costs: ``check`` of one gather eager and compiled, in one run.

Run from the repository root::

    python benchmarks/compiled.py                  # 100 examples, W=1-4, float dtypes
    python benchmarks/compiled.py --max-examples 40

The gather is the functional all_gather along dim 0 (``examples/compiled.py``): called
eagerly, called through ``--compile``, and written compiled (``torch.compile`` in its own module).
Each row is one ``python -m harness check`` in a fresh process, with inductor's cache in a fresh
folder (the first compile of each graph is paid, as on a new machine) and the verdict it gave;
the ratio is each row's examples/s against the eager row's.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

TARGETS = {  # row -> (target, extra flags)
    "eager": ("examples/compiled.py:funcol_gather", ["--dims", "0"]),
    "--compile": ("examples/compiled.py:funcol_gather", ["--dims", "0", "--compile"]),
    "written compiled": ("examples/compiled.py:compiled_funcol_gather", []),
}


def run(target: str, flags: list[str], examples: int, seed: int) -> tuple[str, float, float]:
    """(verdict line, wall seconds, examples/s) of one check in a fresh process and inductor cache."""
    with tempfile.TemporaryDirectory(prefix="gather-compiled-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "harness", "check", target, "--no-ragged", "--dtypes", "float",
                               "--max-examples", str(examples), "--seed", str(seed), "--repro-dir", cache, *flags],
                              capture_output=True, text=True, env=env, timeout=3600)
        wall = time.monotonic() - started
    verdict = next((line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))),
                   (done.stderr.strip().splitlines() or ["?"])[-1])
    searched = re.search(r"in (\d+) examples?.*\(([\d.]+) s\)", verdict)
    rate = int(searched.group(1)) / float(searched.group(2)) if searched else float("nan")
    return verdict, wall, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = [(name, *run(target, flags, args.max_examples, args.seed)) for name, (target, flags) in TARGETS.items()]
    eager_rate = rows[0][3]
    print(f"check of the funcol gather, {args.max_examples} examples, W=1-4, float dtypes, seed {args.seed}; one run")
    print("| called | verdict | wall s | examples/s | vs eager |")
    print("| --- | --- | --- | --- | --- |")
    for name, verdict, wall, rate in rows:
        print(f"| {name} | {verdict} | {wall:.1f} | {rate:.2f} | {rate / eager_rate:.2f}x |")


if __name__ == "__main__":
    main()
