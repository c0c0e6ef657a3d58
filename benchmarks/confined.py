"""Bugs confined to one stratum are met by the strata a default run makes, for every seed.

Run from the repository root::

    python benchmarks/confined.py              # seeds 0-29
    python benchmarks/confined.py --seeds 2    # seeds 0-1 (what the test suite runs)
    python benchmarks/confined.py --markdown

For each seed, the strata of a default run (the four fifths of the ``ci`` profile's 100
examples that strata may take), each stratum's case run once on a shared pool:

- **a pair**: each planted bug of :data:`CONFINED` is wrong only on one pair of path values (a
  dtype and a value class, or a long rank).  Met when some stratum holds the pair and some
  stratum fails, those holding the pair tried first, then those of its dtype, then the rest.
- **a transposed cotangent**: sentence-transformers' gather (``torch.distributed.nn``'s
  backward on gloo) is wrong only for a transposed cotangent on a 2-d input.  Met when some
  stratum has a transposed cotangent, some stratum fails, and every one that fails has a
  transposed (or mixed) cotangent.

A script, not a test: ``tests/test_trust.py`` runs seeds 0 and 1 through the same functions.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from harness import strategies  # noqa: E402
from harness.core.checks import check_outcome  # noqa: E402
from harness.core.contract import Contract  # noqa: E402
from harness.core.conventions import Call  # noqa: E402
from harness.frontends.api import profile_settings  # noqa: E402
from harness.pool.pool import Pool, shared_pool  # noqa: E402
from harness.report.text import markdown_table, text_table  # noqa: E402
from harness.search.engine import RANDOM_SHARE  # noqa: E402

BUGS = "tests.planted.bugs"
#: planted bug -> the pair of path values (or the one value) on which alone it is wrong
CONFINED: list[tuple[str, dict[str, str]]] = [
    ("int64_through_float64", {"dtype": "int64", "values": "random"}),
    ("pads_bool_as_int64", {"dtype": "bool", "values": "random"}),
    ("bfloat16_through_float16", {"dtype": "bfloat16", "values": "random"}),
    ("float16_through_bfloat16", {"dtype": "float16", "values": "random"}),
    ("complex64_drops_imaginary", {"dtype": "complex64", "values": "random"}),
    ("uint8_saturates", {"dtype": "uint8", "values": "random"}),
    ("uint8_sizes", {"long rank": "yes"}),
]
TRANSPOSED = "all_gather_with_grad (transposed cotangent)"
_CI_EXAMPLES = profile_settings("ci").max_examples
#: The strata a default run makes at most: the ``ci`` profile's examples less the share the search
#: keeps for random draws (:data:`harness.search.engine.RANDOM_SHARE`), as ``run_check`` cuts them.
DEFAULT_STRATA = _CI_EXAMPLES - _CI_EXAMPLES // RANDOM_SHARE


def default_strata(contract: Contract, seed: int) -> list[strategies.Stratum]:
    """The strata a default run of ``contract`` makes under ``seed``, of the dtypes gloo gathers."""
    dtypes = tuple(d for d in contract.dtypes if d != "int16")
    return strategies.strata(contract=contract, dtypes=dtypes, backend="gloo", device="cpu", seed=seed)[:DEFAULT_STRATA]


def holding(layers: list[strategies.Stratum], path: dict[str, str]) -> list[strategies.Stratum]:
    """The strata whose path has every value of ``path``."""
    return [layer for layer in layers if all(layer.path.get(axis) == value for axis, value in path.items())]


def pair_missed(pool: Pool, bug: str, path: dict[str, str], seed: int) -> str | None:
    """Why the strata of ``seed`` miss ``bug`` (confined to ``path``); ``None`` when some stratum fails."""
    run = default_strata(Contract(), seed)
    held = holding(run, path)
    if not held:
        return f"no stratum holds {path}"
    alike = holding(run, {"dtype": path["dtype"]}) if "dtype" in path else []
    if any(check_outcome(pool.run(layer.case, f"{BUGS}:{bug}")) for layer in [*held, *alike, *run]):
        return None
    return "no stratum fails"


def transposed_missed(pool: Pool, seed: int) -> str | None:
    """Why the strata of ``seed`` do not show the transposed-cotangent bug alone; ``None`` when they do."""
    run = default_strata(Contract(ragged=False, dims="0", grad="sum"), seed)
    if not holding(run, {"cotangent layout": "transposed"}):
        return "no stratum has a transposed cotangent"
    call = Call(name="all_gather_with_grad", positional=(), signature="all_gather_with_grad(x)")
    failing = [layer for layer in run if check_outcome(pool.run(layer.case, f"{BUGS}:all_gather_with_grad", call=call))]
    if not failing:
        return "no stratum fails"
    others = [layer.label for layer in failing if layer.path.get("cotangent layout") not in ("transposed", "mixed")]
    return f"strata without a transposed cotangent fail too: {others}" if others else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30, help="seeds 0..N-1 (default 30)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    pool = shared_pool()
    checks = [(bug, lambda seed, bug=bug, path=path: pair_missed(pool, bug, path, seed)) for bug, path in CONFINED]
    checks.append((TRANSPOSED, lambda seed: transposed_missed(pool, seed)))
    rows, all_met = [], True
    for name, missed in checks:
        started = time.monotonic()
        misses = [f"seed {seed}: {why}" for seed in range(args.seeds) if (why := missed(seed)) is not None]
        all_met = all_met and not misses
        rows.append((name, f"{args.seeds - len(misses)} of {args.seeds}", "; ".join(misses) or "-",
                     f"{time.monotonic() - started:.1f} s"))
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(f"gather-harness confined bugs: the strata of a default run ({DEFAULT_STRATA} at most), seeds 0-{args.seeds - 1}")
    print((markdown_table if args.markdown else text_table)(("planted bug", "seeds met", "missed", "time"), rows))
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
