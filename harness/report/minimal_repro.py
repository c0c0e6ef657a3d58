"""The minimal repro: a short torch-only script a person pastes into a bug report.

The faithful repro (:mod:`harness.report.repro`) embeds the harness's own procedure and checks, so
it runs exactly what the harness ran -- and is two thousand lines long.  Beside it goes this
one: some fifty lines of plain torch that build the failing case's tensors (literals, or their
exact bytes where a literal cannot say them: NaN payloads, infinities, large tensors), call
the target the way the harness called it (the same call form and arguments, the backward
pass with the same cotangent, the stability checks' further calls), and print, for the
broken property only, what came back against what should have.  It starts its own ranks, or
runs as one rank under ``torchrun``; a rank that hangs dumps its stack and exits.  Exit
status 1: it reproduces; 0: every rank got what it should.

The script is written for its case, as straight-line code: the layouts it does not use,
groups, the backward pass, the further calls and the earlier cases of a history-dependent
finding appear only when they matter.  ``tests/test_repro.py`` runs it for a planted bug of
every property, and for a correct gather.  One concern, one script: :class:`_Script` writes each stage,
and the functions after it only spell a case, a call or a launcher in plain torch.
"""

from __future__ import annotations

import base64
from pathlib import Path

import torch

from harness.core.case import Case, make_cotangent, make_input
from harness.core.checks import gradients_checked
from harness.core.contract import COLLECTIVES
from harness.core.conventions import FIXED, REDUCE_OPS, ROOT_IN_GROUP, SPLIT_ROLES, Call
from harness.core.outputs import OUTPUTS
from harness.core.procedure import split_sizes
from harness.ranks.targets import shown_target
from harness.reference import ExpectedGrad, expected_grad, expected_output, expected_reduction
from harness.report.target_source import import_lines
from harness.search.finding import Finding

#: Tensors up to this many elements are written as literals; larger ones as their bytes.
LITERAL_ELEMENTS = 32
#: Properties judged on the pieces of a result against the reference.
_LIKE_VALUES = ("dtype", "shape", "device", "values", "bits")
#: A rank's exit status when it raised on a misuse case (the right answer there).
RAISED = 4
#: How far into the harness's calls (first call, backward, companion call, same call again) a
#: property's evidence lies: the script makes those calls and no more.
_STAGES = ("first", "backward", "companion", "third")
_STAGE_OF = {"gradients": "backward", "stable": "companion", "repeatable": "third", "inputs-untouched": "third",
             "no-hang-no-crash": "third"}


def path_for(faithful: Path) -> Path:
    """``<property>_minimal.py`` beside the faithful ``<property>.py``."""
    return faithful.with_name(f"{faithful.stem}_minimal.py")


def write(finding: Finding, target: str, faithful: Path, *, timeout_s: float, misuse: bool) -> Path:
    """Write the minimal script beside ``faithful`` (same target, same case); return its path."""
    path = path_for(faithful)
    path.write_text(render(finding, target, faithful.name, path.name, timeout_s, misuse, script_dir=path.parent))
    return path


def render(finding: Finding, target: str, faithful: str, name: str, timeout_s: float, misuse: bool, *,
           script_dir: Path) -> str:
    """The script's text (``script_dir``: where it will be, for a target file it must find from there)."""
    script = _Script(finding, misuse)
    body = script.rank_body()
    imports, target_lines = import_lines(target, script_dir)
    return "\n".join([
        _header(finding, shown_target(target), faithful, name),
        f"import {', '.join(sorted(('faulthandler', 'multiprocessing', 'os', 'socket', 'sys', *imports)))}  # noqa: E401",
        *(["import base64"] if script.uses_raw else []),
        "import torch",
        "import torch.distributed as dist",
        "",
        *target_lines,
        *(["# autograd's first use imports for seconds: done here, once, so no rank's timeout pays for it",
            "warm = torch.ones(1, requires_grad=True)",
            "torch.autograd.grad(warm * 2, warm, torch.ones(1))"]
          if script.backward else []),
        "",
        *script.data,
        *script.helpers(),
        "",
        "def rank_main(rank):",
        *(["    torch.cuda.set_device(rank % torch.cuda.device_count())  # the harness pins rank r to its GPU"]
          if finding.case.device == "cuda" else []),
        f"    faulthandler.dump_traceback_later({float(timeout_s)!r} + rank / 4, exit=True)  # a hang ends: stack, exit 1",
        *body,
        "",
        "",
        *_launcher(finding.case, misuse),
    ]) + "\n"


class _Script:
    """The script's data and rank code for one finding, written as they are needed."""

    def __init__(self, finding: Finding, misuse: bool) -> None:
        self.finding, self.misuse = finding, misuse
        self.case = finding.case
        #: Tensors the harness puts on a GPU are built on the CPU, then moved, as the harness does.
        self.moved = ".cuda()" if self.case.device == "cuda" else ""
        self.repeat = finding.repeat and not misuse
        self.grad = gradients_checked(self.case) and not misuse
        #: A values-like failure seen on the stability checks' second call, not on the first.
        self.on_companion = any("companion input" in v.message for v in finding.violations)
        self.stage = "first" if misuse else _STAGE_OF.get(
            finding.property, "companion" if self.on_companion else "first")
        self.layouts: set[str] = set()
        self.uses_raw = False
        #: The comparison ``differs`` makes, when used: "bits" (byte for byte) or "values".
        self.differs_mode = ""
        self.uses_inverted = False
        #: Whether some case runs the backward pass.
        self.backward = False
        #: Set when ``within`` is used: whether every comparison it makes is exact (no bound).
        self.within: bool | None = None
        self.data: list[str] = []

    # -- data --------------------------------------------------------------------------------
    def tensors(self, name: str, tensors: list[torch.Tensor | None], comment: str) -> str:
        """``NAME = [...]  # comment``: one literal per rank; returns ``NAME``."""
        literals = ["None" if t is None else self.literal(t) for t in tensors]
        line = f"{name} = [{', '.join(literals)}]"
        self.data += [f"{line}  # {comment}" if len(line) + len(comment) < 110 else f"# {comment}\n{line}"]
        return name

    def literal(self, t: torch.Tensor) -> str:
        """Source that rebuilds ``t`` (dense, CPU) bit for bit."""
        dtype = f"torch.{str(t.dtype).removeprefix('torch.')}"
        if t.numel() == 0:
            return f"torch.empty({tuple(t.shape)}, dtype={dtype})"
        if t.numel() <= LITERAL_ELEMENTS and _says_itself(t):
            return f"torch.tensor({t.tolist()!r}, dtype={dtype})"
        self.uses_raw = True
        data = base64.b64encode(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).decode()
        return f"raw({data!r}, {dtype}, {tuple(t.shape)})"

    # -- the rank's code ---------------------------------------------------------------------------
    def rank_body(self) -> list[str]:
        lines = self._group_lines()
        for n, (earlier, repeat) in enumerate(self.finding.history, 1):
            lines += [f"    # earlier case {n} of {len(self.finding.history)} on these ranks: {earlier.describe()}"]
            calls = self._calls(earlier, repeat, gradients_checked(earlier), suffix=f"_{n}", stage="third")
            idle = [r for r in range(earlier.world_size) if earlier.idle(r)]
            lines += [f"    if rank not in {idle!r}:", *("        " + line for line in calls)] if idle else [
                "    " + line for line in calls]
        lines += ["    # the failing case"] if self.finding.history else []
        if self.misuse:
            return lines + self._misuse()
        lines += ["    try:"]
        lines += ["        " + line for line in self._calls(self.case, self.repeat, self.grad, suffix="", stage=self.stage)]
        lines += ["    except Exception as exc:",
                  "        print(f'rank {rank} raised {type(exc).__name__}: {exc}\\n', end='', flush=True)",
                  "        return 1"]
        problems = self._problems()
        unjudged = [r for r in range(self.case.world_size) if not self.case.idle(r) and not self.case.judged(r)]
        if problems and unjudged and self.finding.property in (*_LIKE_VALUES, "stable", "repeatable"):
            lines += [f"    if rank in {unjudged!r}:  # only the destination's result is judged",
                      "        print(f'rank {rank}: returned (its result is not judged)\\n', end='', flush=True)",
                      "        return 0"]
        return lines + ([f"    problems = [p for p in {problems} if p]",
                         "    print(f\"rank {rank}: {'; '.join(problems) or 'as expected'}\\n\", end='', flush=True)",
                         "    return 1 if problems else 0"] if problems else [
                         "    print(f'rank {rank}: returned\\n', end='', flush=True)", "    return 0"])

    def _group_lines(self) -> list[str]:
        cases = [*(earlier for earlier, _ in self.finding.history), self.case]
        order = list(dict.fromkeys(group for case in cases for group in case.groups))
        lines = []
        if order:
            world = self.case.world_size
            lines += ["    # every rank creates every group, in the order the harness did (new_group is collective)",
                      f"    groups = {{g: dist.group.WORLD if len(g) == {world} else dist.new_group(list(g)) "
                      f"for g in {order!r}}}"]
        if self.case.groups and any(self.case.idle(r) for r in range(self.case.world_size)):
            idle = [r for r in range(self.case.world_size) if self.case.idle(r)]
            lines += [f"    if rank in {idle!r}:", "        return 0  # in no group: calls nothing"]
        return lines

    def _calls(self, case: Case, repeat: bool, grad: bool, suffix: str, stage: str) -> list[str]:
        """The harness's calls on one case, up to ``stage``: the first call, the backward pass, the
        call on the companion input, the same call again (the last two where ``repeat``)."""
        upto = _STAGES.index(stage)
        x_name = self.tensors(f"X{suffix}", [make_input(case, r) for r in range(case.world_size)],
                              "each rank's input" + (f" (earlier case {suffix[1:]})" if suffix else ""))
        untouched = self.finding.property == "inputs-untouched" and not suffix
        lines = []
        if case.groups:
            lines += [f"group = groups[next(g for g in {list(case.layout())!r} if rank in g)]"]
        lines += [f"x = {self._laid_out(case, 'layout', x_name, grad)}"]
        lines += ["before, stride, version = x.detach().clone(), x.stride(), x._version"] if untouched else []
        lines += [f"out = {self._read(case, self._call(case, 'x'))}"]
        lines += ["version_after = x._version"] if untouched else []
        if self.finding.property in ("stable", "repeatable") and not suffix:
            lines += ["first = [piece.detach().clone() for piece in out]"]
        if upto >= 1 and grad:
            self.backward = True
            c_name = self.tensors(f"C{suffix}", [make_cotangent(case, r) for r in range(case.world_size)],
                                  "each rank's cotangent: the grad_output its backward receives")
            per_rank = OUTPUTS[case.output].per_rank
            flowing = "torch.stack(out)" if per_rank and case.ndim == 0 else (
                f"torch.cat(out, {case.dim})" if per_rank else "out[0]")
            lines += [f"y = {flowing}",
                      "grad = torch.autograd.grad(y, x, "
                      f"{self._laid_out(case, 'cotangent_layout', c_name, False)}, allow_unused=True)[0] "
                      "if y.requires_grad else 'none: the result does not require grad'"]
        if upto >= 2 and repeat:
            self.uses_inverted = True
            companion = self._laid_out(case, 'layout', f'[inverted(v) for v in {x_name}]', False)
            lines += [f"second = {self._read(case, self._call(case, companion))}  # every input bit inverted"]
            if self.finding.property == "stable" and not suffix:
                lines += ["later = [piece.detach().clone() for piece in out]  # the first result, read again"]
        if upto >= 3 and repeat:
            lines += [f"third = {self._read(case, self._call(case, 'x'))}  # the same input again"]
        lines += ["after = x.detach().clone()"] if untouched else []
        return lines

    def _call(self, case: Case, x: str) -> str:
        return call_source(self.finding.call, x, case)

    def _read(self, case: Case, call: str) -> str:
        """The result's pieces as the harness read them (one tensor, or one per rank for ``list``)."""
        if OUTPUTS[case.output].per_rank:  # (a gather-to's other ranks may return None)
            return f"list({call} or ())" if COLLECTIVES[case.collective].to_root else f"list({call})"
        return f"[{call}[0]]" if OUTPUTS[case.output].picks_first else f"[{call}]"

    def _laid_out(self, case: Case, field: str, values: str, grad: bool) -> str:
        """``values[rank]`` in each rank's layout of ``field`` (the base is the leaf that requires grad)."""
        kinds = [_layout(getattr(spec, field), len(spec.shape)) for spec in case.ranks]
        self.layouts.update(kinds)

        def laid(kind: str, index: str) -> str:
            if kind == "contiguous":
                return f"{values}[{index}].clone()" + (".requires_grad_()" if grad else "") + self.moved
            return f"{kind}({values}[{index}]{', grad=True' if grad else ''}){self.moved}"

        if len(set(kinds)) == 1:
            return laid(kinds[0], "rank")
        return f"[{', '.join(laid(kind, str(r)) for r, kind in enumerate(kinds))}][rank]"

    def _problems(self) -> str:
        """A Python list expression of the strings describing what is wrong ('' for what is right)."""
        prop = self.finding.property
        if prop not in ("gradients", "no-hang-no-crash"):
            self.differs_mode = "values" if prop in ("dtype", "shape", "device", "values") else "bits"
        names = self._names()
        bounded = self._bounded_values(self.on_companion) if prop in _LIKE_VALUES else None
        if bounded is not None:
            return bounded
        if prop in _LIKE_VALUES:
            if self.on_companion:
                return (f"[differs(what, got, want, ' on the second call (every input bit inverted)') for what, "
                        f"got, want in zip({names}, second, {self._expected('[inverted(v) for v in X]')})]")
            return f"[differs(what, got, want) for what, got, want in zip({names}, out, {self._expected('X')})]"
        if prop == "inputs-untouched":
            written = ("f'the call wrote into x in place (x._version {version} -> {version_after}) though its "
                       "values are unchanged: a relu or sigmoid before the gather then fails in backward' "
                       "if version_after != version else ''") if self.grad else "''"
            return (f"[f'x.stride() = {{x.stride()}} after the calls, {{stride}} before' if x.stride() != stride else "
                    f"differs('x', after, before, ' after the calls') or {written}]")
        if prop == "gradients":
            return self._gradient_problems()
        if prop == "stable":
            return (f"[differs(what, got, want, ' read again after a second call (on other input)') "
                    f"for what, got, want in zip({names}, later, first)]")
        if prop == "repeatable":
            return (f"[differs(what, got, want, ' of the same call made again') "
                    f"for what, got, want in zip({names}, third, first)]")
        return ""  # no-hang-no-crash: returning at all is the answer; a hang ends with the watchdog

    def _names(self) -> str:
        """How the pieces of a result are named: ``output``, ``output[0]`` (first), ``output[s]`` (list)."""
        output = OUTPUTS[self.case.output]
        if output.per_rank and self.case.groups:
            return "[f'output[{k}]' for k in range(len(out))]"
        return repr(output.piece_names(len(self.case.members(0)) or 1))

    def _expected(self, values: str) -> str:
        """The reference pieces, from every rank's input: the concatenation (or stack, or the list) of the
        group's; for a reduce-scatter or an all-to-all, the reference's own result as data."""
        case = self.case
        if case.collective != "gather":
            companion = "inverted" in values
            name = self.tensors("WANT_SECOND" if companion else "WANT", [
                None if case.idle(r) else expected_output(case, r, companion=companion) for r in range(case.world_size)],
                f"what each rank must get from the {case.collective}" + (" on the second call" if companion else ""))
            if OUTPUTS[case.output].per_rank:  # an all-to-all's rows from each member
                received = [split_sizes(case, r).get("output_split_sizes") for r in range(case.world_size)]
                return f"list({name}[rank]{self.moved}.split({received!r}[rank], {case.dim}))"
            return f"[{name}[rank]{self.moved}]"
        mine = f"[{values}[s]{self.moved} for s in {self._members()}]"
        if OUTPUTS[case.output].per_rank:
            return mine
        if OUTPUTS[case.output].stacked:
            return f"[torch.stack({mine})]"
        return f"[torch.cat({mine}, {case.dim})]"

    def _bounded_values(self, companion: bool) -> str | None:
        """A float reduction's result (a reduce-scatter's, an all-reduce's) against the exact one, within
        the rounding any order of additions may add (as the harness judges it); ``None`` where the
        result must be exact."""
        case = self.case
        if not COLLECTIVES[case.collective].reduces:
            return None
        wanted = {r: expected_reduction(case, r, companion=companion) for r in range(case.world_size)
                  if not case.idle(r)}
        bounded = {r: want for r, want in wanted.items() if isinstance(want, ExpectedGrad)}
        if not bounded or len(bounded) < len(wanted):
            return None
        second = "_SECOND" if companion else ""
        self.tensors(f"WANT{second}", [bounded[r].exact if r in bounded else None for r in range(case.world_size)],
                     f"the exact {case.op} of every rank's {'x' if COLLECTIVES[case.collective].dimless else 'slot r'} "
                     f"(double precision)"
                     + (" on the second call" if companion else ""))
        self.tensors(f"BOUND{second}", [bounded[r].bound if r in bounded else None for r in range(case.world_size)],
                     "the rounding a float sum may add (0: exact)")
        self.within = False  # a bound, wherever else ``within`` is used
        when = ", ' on the second call (every input negated)'" if companion else ""
        return (f"[within('output', {'second' if companion else 'out'}[0], torch.{case.dtype}, "
                f"WANT{second}[rank]{self.moved}, BOUND{second}[rank]{when})]")

    def _members(self) -> str:
        if not self.case.groups:
            return f"range({self.case.world_size})"
        return f"next(g for g in {list(self.case.layout())!r} if rank in g)"

    def _gradient_problems(self) -> str:
        case = self.case
        wanted = {r: expected_grad(case, r, case.grad) for r in range(case.world_size) if not case.idle(r)}
        formula = {"local": "C_r[slot r]", "sum": "sum over ranks s of C_s[slot r]",
                   "mean": "(1/W) x sum over ranks s of C_s[slot r]",
                   "adjoint": f"the reverse {case.collective} of every rank's C"}[case.grad]
        self.tensors("WANT", [wanted[r].exact if r in wanted else None for r in range(case.world_size)],
                     f"contract {case.grad}: grad of x_r = {formula}")
        exact = all(not bool(w.bound.any()) for w in wanted.values())
        if not exact:
            self.tensors("BOUND", [wanted[r].bound if r in wanted else None for r in range(case.world_size)],
                         "the rounding a float sum may add (0: exact)")
        self.within = exact if self.within is None else self.within and exact
        return ("[grad if isinstance(grad, str) else 'grad of x is None: no gradient reached x' if grad is None "
                f"else within('grad', grad, x.dtype, WANT[rank]{self.moved}" + ("" if exact else ", BOUND[rank]") + ")]")

    def _misuse(self) -> list[str]:
        case = self.case
        lines = ["    try:"]
        lines += ["        " + line for line in self._calls(case, False, False, suffix="", stage="first")]
        lines += ["    except Exception as exc:  # a misuse case: raising is the right answer",
                  "        print(f'rank {rank} raised, as it should on a misuse case: {type(exc).__name__}: {exc}', "
                  "flush=True)",
                  f"        return {RAISED}"]
        if OUTPUTS[case.output].stacked and case.is_ragged:
            return lines + ["    print(f'rank {rank}: returned a result for inputs of different shapes, which "
                            "cannot be stacked', flush=True)", "    return 1"]
        self.differs_mode = "values"
        return lines + [
            f"    problems = [p for p in [differs(what, got, want) for what, got, want in "
            f"zip({self._names()}, out, {self._expected('X')})] if p]",
            "    print(f\"rank {rank} returned {'a wrong answer: ' + '; '.join(problems) if problems else 'the right "
            "answer'}\\n\", end='', flush=True)",
            "    return 1 if problems else 0",
        ]

    # -- helpers, only those used ------------------------------------------------------------------
    def helpers(self) -> list[str]:
        lines: list[str] = []

        def add(*source: str) -> None:
            lines.extend(["", "", *source])

        if self.finding.call.waits:
            add("def waited(out):  # async_op=True: the result is read once its work handle is waited on",
                "    handles = [h for h in (out if isinstance(out, (list, tuple)) else [out])",
                "               if not isinstance(h, torch.Tensor) and callable(getattr(h, 'wait', None))]",
                "    for handle in handles:",
                "        handle.wait()",
                "    return None if out in handles else out")
        if self.uses_raw:
            add("def raw(data, dtype, shape):  # exact bytes: NaN payloads, infinities, large tensors",
                "    return torch.frombuffer(bytearray(base64.b64decode(data)), dtype=torch.uint8).view(dtype)"
                ".reshape(shape)")
        if self.uses_inverted and COLLECTIVES[self.case.collective].reduces:
            add("def inverted(v):  # negated (every bit flipped for integers): a sum of it stays finite",
                "    if v.is_floating_point() or v.is_complex():",
                "        return -v",
                "    return v.reshape(-1).view(torch.uint8).bitwise_not().view(v.dtype).reshape(v.shape)")
        elif self.uses_inverted:
            add("def inverted(v):  # every bit flipped",
                "    return v.logical_not() if v.dtype == torch.bool else "
                "v.reshape(-1).view(torch.uint8).bitwise_not().view(v.dtype).reshape(v.shape)")
        for kind in ("transposed", "strided", "offset"):
            if kind in self.layouts:
                add(*_LAYOUT_HELPERS[kind])
        if self.differs_mode:
            add(*_differs(self.differs_mode))
        if self.within is not None:
            add(*_within(self.within, self.case.dtype.startswith("complex")))
        return lines[1:]


_LAYOUT_HELPERS = {
    "transposed": ("def transposed(t, grad=False):  # a permuted view: strides reversed; the base is the leaf",
                   "    flip = list(reversed(range(t.ndim)))",
                   "    return t.permute(flip).contiguous().requires_grad_(grad).permute(flip)"),
    "strided": ("def strided(t, grad=False):  # every other element of a wider base",
                "    base = torch.full((*t.shape[:-1], 2 * t.shape[-1]), 113).to(t.dtype)",
                "    base[..., ::2] = t",
                "    return base.requires_grad_(grad)[..., ::2]"),
    "offset": ("def offset(t, grad=False):  # a view starting 3 elements into its storage",
               "    base = torch.full((t.numel() + 3,), 113).to(t.dtype)",
               "    base[3:] = t.reshape(-1)",
               "    return base.requires_grad_(grad)[3:].view(t.shape)"),
}

def _differs(mode: str) -> tuple[str, ...]:
    """``differs(what, got, want, when='')``: how ``got`` differs from ``want``, or ''."""
    same: tuple[str, ...]
    if mode == "bits":
        doc = "byte for byte: signed zeros and NaN payloads count"
        same = ("    raw = lambda t: t.reshape(-1).view(torch.uint8).reshape(t.numel(), t.element_size())  # noqa: E731",
                "    same = (raw(g) == raw(w)).all(-1).reshape(g.shape)")
    else:
        doc = "NaN equals NaN, -0.0 equals 0.0"
        same = ("    same = (g == w) | ((g != g) & (w != w))",)
    return (
        f"def differs(what, got, want, when=''):  # '' when equal ({doc})",
        "    if not isinstance(got, torch.Tensor):",
        "        return f'{what}{when} is a {type(got).__name__}, expected a Tensor'",
        "    for attr in ('dtype', 'shape', 'device'):",
        "        if getattr(got, attr) != getattr(want, attr):",
        "            return f'{what}.{attr}{when} = {getattr(got, attr)}, expected {getattr(want, attr)}'",
        "    g, w = got.detach().cpu(), want.detach().cpu()",
        *same,
        "    i = tuple((~same).nonzero()[0].tolist()) if not bool(same.all()) else None",
        "    return '' if i is None else (f'{what}{list(i)}{when} = {g[i].item()!r}, expected {w[i].item()!r} '",
        "                                 f'({int((~same).sum())} of {same.numel()} elements differ)')",
    )


def _within(exact: bool, complex_: bool) -> tuple[str, ...]:
    """``within(what, got, dtype, want[, bound, when])``: how ``got`` differs from the exact
    ``want`` beyond ``bound``, or '' (a gradient, or a float reduction's result)."""
    have, want = ("torch.view_as_real(have)", "torch.view_as_real(want)") if complex_ else ("have", "want")
    nan = f"({have}.isnan() & {want}.isnan())"  # NaN is NaN, as the harness judges values
    if exact:
        good = f"({have} == {want}) | {nan}"
    else:
        bound = "bound[..., None]" if complex_ else "bound"
        good = f"(({have} - {want}).abs() <= {bound}) | ({have} == {want}) | {nan}"
    # a complex NaN (either part) is one value however its parts read (harness.reference.within_bound)
    complex_nan = f"({have}.isnan().any(-1) & {want}.isnan().any(-1))"
    return (
        f"def within(what, got, dtype, want{'' if exact else ', bound'}, when=''):  # '' when close enough",
        "    if not isinstance(got, torch.Tensor):",
        "        return f'{what}{when} is a {type(got).__name__}, expected a Tensor'",
        "    if (got.dtype, got.shape, got.device) != (dtype, want.shape, want.device):",
        "        return (f'{what}{when} is {got.dtype} of shape {tuple(got.shape)} on {got.device}, expected '",
        "                f'{dtype} of shape {tuple(want.shape)} on {want.device}')",
        "    have, want = got.detach().cpu().to(want.dtype), want.cpu()  # compared in double precision",
        f"    good = ({good}).all(-1) | {complex_nan}" if complex_ else f"    good = {good}",
        "    i = tuple((~good).nonzero()[0].tolist()) if not bool(good.all()) else None",
        "    return '' if i is None else f'{what}{list(i)}{when} = {got[i].item()!r}, expected {want[i].item()!r}'"
        + ("" if exact else " + f' (+-{float(bound[i]):.3g})'"),
    )


def call_source(call: Call, x: str, case: Case) -> str:
    """The call as the harness makes it (:meth:`harness.core.conventions.Call.invoke`), as source.

    Each argument is written as the expression that gives the rank the same value: the dim,
    the rank's ``group`` (or the world group a case without a layout passes), the rank and the
    size in that group, and each fixed argument's literal.
    """
    passing = case.passes_group
    group = "group" if case.groups else ("dist.group.WORLD" if passing and call.takes_group else "None")
    values = {"dim": repr(case.dim), "group": group, "rank": f"dist.get_rank({group})",
              "world_size": f"dist.get_world_size({group})", "scatter_dim": repr(case.scatter_dim),
              "op": f"dist.ReduceOp.{REDUCE_OPS[case.op][0]}", "op_name": repr(REDUCE_OPS[case.op][1]),
              **{role: f"dist.get_global_rank(group, {case.root})" if case.groups else repr(case.root)
                 for role in ROOT_IN_GROUP},
              **{role: repr(case.root) for role in ROOT_IN_GROUP.values()}}
    for role in SPLIT_ROLES.intersection(COLLECTIVES[case.collective].roles):  # one literal per rank, indexed
        values[role] = f"{[split_sizes(case, r).get(role) for r in range(case.world_size)]!r}[rank]"
    if "output_list" in call.roles:  # one empty piece per member, which the target fills
        values["output_list"] = (f"(outs := [{x}.new_empty([n if k == {case.dim} % {x}.ndim else s for k, s in "
                                 f"enumerate({x}.shape)]) for n in {values['output_split_sizes']}])")
    at_root = f"dist.get_rank({group}) == {case.root}"
    if "gather_list" in call.roles:  # dist.gather's: one piece like x per member at the destination
        values["gather_list"] = (f"(outs := [{x}.new_empty({x}.shape) for _ in range(dist.get_world_size({group}))] "
                                 f"if {at_root} else None)")
    if "output_slot" in call.roles:  # dist.scatter's output: this member's slot
        length = f"{values['split_sizes']}[dist.get_rank({group})]"
        values["output_slot"] = (f"(outs := {x}.new_empty([{length} if k == {case.dim} % {x}.ndim else s "
                                 f"for k, s in enumerate({x}.shape)]))")
    fixed = dict(call.kwargs)
    source = x
    if call.split_input:  # the target takes x as a list of its pieces
        source = f"list({x}.split({values[call.split_input]}, {case.dim if case.scatter_dim is None else case.scatter_dim}))"
    if call.x_at_source:  # dist.scatter's scatter_list: at the source alone
        source = f"({source} if {at_root} else None)"
    args, kwargs = call.arguments(source, lambda parameter, role: fixed[parameter] if role == FIXED else values[role],
                                  passing)
    args += [f"{parameter}={value}" for parameter, value in kwargs.items()]
    function = "target.apply" if call.apply else "target"
    made = f"{f'torch.compile({function})' if call.compiled else function}({', '.join(args)})"
    made = f"waited({made})" if call.waits else made
    # a target that fills the list and returns None gives the list, as Call.invoke reads it; one that
    # returns None and leaves its result in x (dist.all_reduce(x)) gives x, as run_case reads it
    if {"output_list", "gather_list", "output_slot"}.intersection(call.roles):
        return f"(lambda out: outs if out is None else out)({made})"
    return f"(lambda out: {x} if out is None else out)({made})" if COLLECTIVES[case.collective].in_place else made


def _layout(layout: str, ndim: int) -> str:
    """The layout :func:`harness.core.case.make_input` really builds for ``layout`` at ``ndim`` dims."""
    if layout == "contiguous":
        return layout
    if ndim == 0:
        return "offset"
    return "strided" if layout == "transposed" and ndim < 2 else layout


def _says_itself(t: torch.Tensor) -> bool:
    """Whether ``t.tolist()`` written as source gives ``t`` back exactly (no NaN, no infinity)."""
    if t.dtype == torch.bool or not (t.is_floating_point() or t.is_complex()):
        return True
    parts = torch.view_as_real(t) if t.is_complex() else t
    return bool(parts.isfinite().all())


def _header(finding: Finding, target: str, faithful: str, name: str) -> str:
    case = finding.case
    return f'''#!/usr/bin/env python3
"""Minimal repro: {finding.property} of {target}, in plain torch (gather-harness, torch {torch.__version__}).

    {case.describe()}

Run: python {name}   or: torchrun --standalone --nproc-per-node {case.world_size} {name}
Exit status 1: it reproduces; 0: every rank got what it should. Every check, as the harness ran it: {faithful}
"""'''


def _launcher(case: Case, misuse: bool) -> list[str]:
    world, backend = case.world_size, case.backend
    if misuse:
        verdict = f"any(c not in (0, {RAISED}) for c in codes) or len(set(codes)) > 1  # all must raise, or all answer"
        torchrun_exit = f"sys.exit(0 if (code := rank_main(dist.get_rank())) == {RAISED} else code)"
    else:
        verdict = "any(codes)"
        torchrun_exit = "sys.exit(rank_main(dist.get_rank()))"
    return [
        "def spawned(rank, init):",
        f"    dist.init_process_group({backend!r}, init_method=init, rank=rank, world_size={world})",
        "    os._exit(rank_main(rank))  # no teardown: a group out of step would block it",
        "",
        "",
        "if __name__ == '__main__':",
        "    if 'RANK' in os.environ:  # under torchrun: this process is one rank",
        f"        dist.init_process_group({backend!r})",
        f"        {torchrun_exit}",
        "    with socket.socket() as s:",
        "        s.bind(('127.0.0.1', 0))",
        "        init = f'tcp://127.0.0.1:{s.getsockname()[1]}'",
        f"    ranks = [multiprocessing.get_context('fork').Process(target=spawned, args=(r, init)) for r in range({world})]",
        "    [p.start() for p in ranks] + [p.join() for p in ranks]",
        "    codes = [p.exitcode for p in ranks]",
        f"    failed = {verdict}",
        "    print(f'exit status by rank: {codes}:', 'it reproduces' if failed else 'not reproduced')",
        "    sys.exit(1 if failed else 0)",
    ]
