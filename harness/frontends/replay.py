"""``python -m harness replay``: a fuzz summary's findings run once more, each on fresh ranks.

A finding in a summary (``fuzz --json``) carries its target, calling convention and case as
plain data; replaying it needs nothing of the search that found it.  ``reproduced`` means the
finding's own property broke again; ``--on-cpu`` moves a CUDA finding to gloo on CPU tensors.
Exit status 1 when any chosen finding still fails, 0 when none does, 2 for a summary or an
index that cannot be read.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from harness.core.case import Case
from harness.core.checks import check_misuse, check_outcome
from harness.core.compare import Violation
from harness.core.conventions import Call
from harness.core.errors import Exit, PoolError, UsageError
from harness.frontends.arguments import one_line
from harness.pool.machine import check_devices
from harness.pool.pool import shared_pool
from harness.ranks import targets
from harness.search.finding import format_violations


def run_replay_command(args: argparse.Namespace) -> int:
    """``replay``: each chosen finding's case once more, on fresh ranks; 1 if any still fails."""
    findings = _load_findings(args.summary)
    if args.index is not None and not 0 <= args.index < len(findings):
        raise UsageError(f"--index {args.index}: {args.summary} has {len(findings)} finding(s)")
    chosen = findings if args.index is None else [findings[args.index]]
    for finding in chosen:  # a target this machine cannot import is the replay's mistake, not a failure
        targets.locate(finding["target"])
    pool = shared_pool()
    failed = 0
    for finding in chosen:
        case = _replay_case(finding, args.on_cpu)
        outcome = pool.run(case, finding["target"], call=Call.from_dict(finding.get("call") or {}), timeout=args.timeout)
        violations = (check_misuse if finding.get("out_of_contract") else check_outcome)(outcome)
        failed += bool(violations)
        print(f"[{finding['index']}] {finding['name']} ({finding['property']}): {_replay_verdict(finding, violations)}")
        if violations:
            print(format_violations(case, violations))
    return Exit.COUNTEREXAMPLE if failed else Exit.PASS


def _replay_verdict(finding: dict, violations: list[Violation]) -> str:
    """``reproduced`` only when the finding's own property broke again: the same case failing
    another property is a failure too, but not this finding (a CPU replay of a CUDA finding, say)."""
    if not violations:
        return "did not reproduce (the case passed)"
    broken = sorted({violation.property for violation in violations})
    if finding["property"] in broken:
        return "reproduced"
    return f"not reproduced as {finding['property']}: the case failed {', '.join(broken)} instead"


def _load_findings(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            findings = json.load(handle)["findings"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a readable fuzz summary ({one_line(exc)})") from None
    if not findings:
        raise UsageError(f"{path}: the summary has no findings to replay")
    return findings


def _replay_case(finding: dict, on_cpu: bool) -> Case:
    """The finding's case, moved to gloo/CPU if asked; a usage error if this machine cannot run it."""
    case = Case.from_dict(finding["case"])
    if on_cpu:
        case = dataclasses.replace(case, backend="gloo", device="cpu")
    try:
        check_devices(case.backend, case.device, case.world_size)
    except PoolError as exc:
        raise UsageError(f"finding {finding['index']}: {exc}; add --on-cpu to run it with gloo on CPU tensors") from None
    return case
