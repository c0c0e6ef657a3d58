"""Coverage data and the coverage page: counts, axis rules, JSON, merging, the summary, the HTML.

Pure data: no rank processes.  One test draws cases from the real strategy to show that the
counts are exactly the examples recorded.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from harness.strategies import cases
from harness.strategies.space import AXES, axes, events
from hypothesis import HealthCheck, given, settings

from harness.core.case import Case, RankSpec
from harness.core.contract import Contract
from harness.frontends import commands as cli
from harness.report import coverage_page
from harness.search.coverage import Coverage
from harness.search.engine import run_check
from tests.budgets import CASE_TIMEOUT_S

DTYPES = ("float32", "float64", "bfloat16", "int64")
#: Axes a case takes exactly one value on (the others count each value its ranks hold).
PER_CASE = ("W", "dtype", "ndim", "dim", "raggedness", "long rank", "output")


def case(*lengths: int, dtype: str = "float32", dim: int = 0, grad: str = "none",
         groups: tuple[tuple[int, ...], ...] = (), ranks: tuple[RankSpec, ...] = ()) -> Case:
    """A 2-d case with one contiguous iota rank per length along ``dim`` (the other dim is 2), or ``ranks``."""
    shapes = [(n, 2) if dim % 2 == 0 else (2, n) for n in lengths]
    return Case(ranks=ranks or tuple(RankSpec(shape) for shape in shapes), dim=dim, dtype=dtype, grad=grad,
                groups=groups)


def words(lines: list[str]) -> str:
    """Wrapped lines as one line, single-spaced."""
    return " ".join(" ".join(lines).split())


def finding(failing: Case, prop: str = "values") -> dict:
    return {"property": prop, "kind": "mismatch", "case": failing.to_dict(), "case_line": failing.describe(),
            "message": f"property violated: {prop}\nout[0]=<lambda>, but should be 1.0 & more",
            "repro": f".gather-harness/repros/pkg.gather/{prop}.py"}


# ---------------------------------------------------------------------------------------------
# axes of one case


def test_axes_name_every_value_of_a_case() -> None:
    mixed = Case(
        ranks=(RankSpec((2, 0), layout="offset", values="special", cotangent="floats"),
               RankSpec((2, 300), cotangent_layout="transposed"),
               RankSpec((2, 1), layout="offset")),
        dim=-1, dtype="complex64", grad="sum",
    )
    assert axes(mixed) == {
        "W": ("3",), "dtype": ("complex64",), "ndim": ("2",), "dim": ("-1",), "dim kind": ("negative",),
        "raggedness": ("zero-length rank",), "zero-size dim": ("no",), "long rank": ("yes",), "activation": ("no",),
        "layout": ("contiguous", "offset", "mixed"), "values": ("iota", "special"),
        "groups": ("world",), "output": ("tensor",), "cotangent": ("ints", "floats"),
        "cotangent layout": ("contiguous", "transposed", "mixed"),
    }
    assert list(axes(mixed)) == list(AXES)
    assert events(mixed)[:4] == ["W=3", "dtype=complex64", "ndim=2", "dim=-1"]
    assert "layout=offset" in events(mixed) and "cotangent layout=transposed" in events(mixed)


def test_raggedness_is_the_first_of_all_empty_one_rank_zero_length_ragged_equal() -> None:
    assert axes(case(0, 0))["raggedness"] == ("all empty",)
    assert axes(case(3))["raggedness"] == ("one rank",)
    assert axes(case(0, 2, 1))["raggedness"] == ("zero-length rank",)
    assert axes(case(1, 2))["raggedness"] == ("ragged",)
    assert axes(case(2, 2))["raggedness"] == ("equal",)
    # lengths along dim: an empty dim elsewhere is its own axis
    empty_elsewhere = axes(case(3, 3, ranks=(RankSpec((3, 0)), RankSpec((3, 0)))))
    assert (empty_elsewhere["raggedness"], empty_elsewhere["zero-size dim"]) == (("equal",), ("yes",))


def test_dim_kind_and_activation() -> None:
    assert [axes(case(2, 2, dim=d))["dim kind"] for d in (0, -1)] == [("0",), ("negative",)]
    activation = Case(ranks=(RankSpec((3, 2, 32)), RankSpec((1, 2, 32))), grad="sum")
    assert axes(activation)["activation"] == ("yes",) and axes(activation)["dim kind"] == ("0",)
    no_batch = Case(ranks=(RankSpec((1, 3, 32)),), dim=1)
    assert axes(no_batch)["activation"] == ("no",) and axes(no_batch)["dim kind"] == ("positive",)


def test_a_stack_of_0d_inputs_has_ndim_0() -> None:
    stacked = axes(Case(ranks=(RankSpec(()), RankSpec(())), output="stack"))
    assert (stacked["ndim"], stacked["dim"], stacked["raggedness"], stacked["output"]) == (
        ("0",), ("0",), ("equal",), ("stack",))
    assert stacked["zero-size dim"] == stacked["activation"] == ("no",)


def test_cases_without_gradients_have_no_cotangent_axes() -> None:
    assert "cotangent" not in axes(case(1, grad="none"))
    assert axes(case(1, grad="mean"))["cotangent"] == ("ints",)


def test_group_layouts_and_idle_ranks() -> None:
    assert axes(case(1, 1, 1))["groups"] == ("world",)
    assert axes(case(1, 1, 1, groups=((0, 1, 2),)))["groups"] == ("one group",)
    assert axes(case(1, 1, 1, groups=((0, 1), (2,))))["groups"] == ("several groups",)
    assert axes(case(1, 1, 1, groups=((0, 2), (1,))))["groups"] == ("several groups", "interleaved groups")
    idle = case(1, 300, 1, groups=((0, 2),), ranks=(RankSpec((1, 2)), RankSpec((300, 2), layout="strided"),
                                                       RankSpec((1, 2))))
    assert axes(idle)["groups"] == ("one group", "idle ranks", "interleaved groups")
    # The idle rank gathers nothing: its length and layout count nowhere.
    assert axes(idle)["long rank"] == ("no",) and axes(idle)["layout"] == ("contiguous",)


# ---------------------------------------------------------------------------------------------
# counting


def test_counts_are_the_examples_recorded_and_a_failure_lands_in_its_cell() -> None:
    coverage = Coverage(world_sizes=(1, 3), dtypes=DTYPES)
    for example in [case(1), case(2, 3), case(2, 3, dim=-1), case(0, 1, 2, dtype="bfloat16")]:
        coverage.record(example)
    coverage.record(case(4, 0, 1, dtype="bfloat16"), failed="values")
    assert (coverage.examples, coverage.failures) == (5, 1)
    assert coverage.cell(3, "bfloat16") == (2, 1)
    assert coverage.cell(2, "float32") == (2, 0) and coverage.cell(1, "float32") == (1, 0)
    assert coverage.cell(2, "bfloat16") == (0, 0)
    assert coverage.cells[3, "bfloat16"].failed == {"values": 1}
    assert coverage.by_axis["raggedness"]["zero-length rank"].examples == 2
    assert coverage.by_axis["raggedness"]["zero-length rank"].failures == 1
    assert coverage.by_axis["dim"]["-1"].examples == 1 and coverage.by_axis["dim"]["0"].examples == 4


def test_drawn_cases_are_counted_once_each() -> None:
    drawn: list[Case] = []

    @settings(max_examples=40, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(cases(contract=Contract(grad="sum", world_sizes=(1, 4), dtypes=DTYPES, groups=True)))
    def draw(example: Case) -> None:
        drawn.append(example)

    draw()
    coverage = Coverage(world_sizes=(1, 4), dtypes=DTYPES, grad=True, groups=True)
    for example in drawn:
        coverage.record(example)
    assert coverage.examples == len(drawn) > 0
    assert sum(coverage.cell(w, dtype)[0] for w in range(1, 5) for dtype in DTYPES) == len(drawn)
    for axis in PER_CASE:
        assert sum(tally.examples for tally in coverage.by_axis[axis].values()) == len(drawn), axis
    assert "world" not in coverage.by_axis["groups"]  # with groups, every case draws a layout
    graded = sum(1 for example in drawn if example.grad != "none")
    assert all(tally.examples <= graded for tally in coverage.by_axis.get("cotangent", {}).values())


def test_json_round_trip_and_merge_adds_counts() -> None:
    first = Coverage(world_sizes=(1, 2), dtypes=("float32",), grad=True)
    first.record(case(1, 2, grad="sum"))
    first.record(case(1, 2, grad="sum"), failed="gradients")
    second = Coverage(world_sizes=(2, 4), dtypes=("int64",), dims="0", ragged=False)
    second.record(case(3, 3, dtype="int64"))
    second.record(case(1, 2))

    assert Coverage.from_json(json.loads(json.dumps(first.to_json()))) == first
    merged = first.merge(second)
    assert Coverage.from_json(json.loads(json.dumps(merged.to_json()))) == merged
    assert (merged.examples, merged.failures) == (4, 1)
    assert merged.cell(2, "float32") == (3, 1) and merged.cell(2, "int64") == (1, 0)
    assert merged.by_axis["raggedness"]["ragged"].examples == 3
    assert (merged.world_sizes, merged.dtypes, merged.grad, merged.ragged, merged.dims) == (
        (1, 4), ("int64", "float32"), True, True, "any")
    assert first.examples == 2  # merging made a new one


def test_a_merged_run_is_not_blamed_for_pairs_no_one_of_its_runs_could_reach() -> None:
    """A report merges gathers (bool, no ``normal`` values) with reductions (``normal``, no bool):
    the union of their spaces has ``dtype=bool x values=normal``, which neither run can draw."""
    gather = Coverage.for_contract(Contract(), dtypes=("bool", "float32"))
    reduction = Coverage.for_contract(Contract(collective="reduce-scatter"), dtypes=("float32",))
    merged = gather.merge(reduction)
    impossible = "dtype=bool x values=normal"
    assert impossible not in merged.possible_pairs() and impossible not in merged.pairs_missing()
    assert merged.possible_pairs() == gather.possible_pairs() | reduction.possible_pairs()
    assert Coverage.from_json(json.loads(json.dumps(merged.to_json()))) == merged


# ---------------------------------------------------------------------------------------------
# what was never reached, and the terminal summary


def test_never_reached_names_the_cells_and_values_the_space_allows() -> None:
    coverage = Coverage(world_sizes=(1, 2), dtypes=("float32", "bfloat16"))
    coverage.record(case(1))
    coverage.record(case(1, 2, dtype="bfloat16", dim=-1))
    missing = coverage.never_reached()
    assert missing[:2] == ["W=1 bfloat16", "W=2 float32"]
    assert "dim=-2" in missing and "dim=-1" not in missing and "raggedness=zero-length rank" in missing
    assert "cotangent=ints" not in missing  # no gradients in this space
    assert "groups=one group" not in missing and "groups=world" not in missing

    summary = coverage.summary(width=100)
    assert "2 cases run" in summary and "2 of 4 W x dtype cells reached" in summary
    lines = summary.splitlines()
    assert len(lines) == 1 + 3 + 2 + 2  # totals, the matrix (a header and two rows), what was missed, the pairs
    never = words(lines[4:6])
    assert words(lines[6:]).startswith("pairs of path axes: ")
    assert "missing (" in lines[6] and lines[7].endswith("…")
    assert never.startswith("never reached (") and "W=1 bfloat16; W=2 float32" in never and "dim=-2" in never
    # counted as the line above counts: cells apart from axis values (2 of 4 cells reached: 2 cells missing)
    assert never.startswith("never reached (2 cells, ") and " axis values): " in never


def test_the_summary_marks_failing_cells_folds_rows_never_reached_and_cuts_the_never_line() -> None:
    coverage = Coverage(world_sizes=(1, 64), dtypes=DTYPES, grad=True, groups=True)
    coverage.record(case(1, 2, dtype="bfloat16"), failed="values")
    coverage.record(case(1, 2, 3, 4, 5, 6))
    lines = coverage.summary(width=72).splitlines()
    assert lines[0].startswith("coverage: 2 cases run, 1 failing")
    assert lines[1].split() == ["i64", "bf16", "f32", "f64"]
    assert [line.split() for line in lines[2:7]] == [
        ["W=1", "·", "·", "·", "·"], ["W=2", "·", "1!", "·", "·"], ["W=3-5", "·", "·", "·", "·"],
        ["W=6", "·", "·", "1", "·"], ["W=7-64", "·", "·", "·", "·"]]
    assert len(lines) == 7 + 2 + 2 and all(len(line) <= 72 for line in lines[-4:]) and lines[-3].endswith("…")
    assert lines[-4].startswith("never reached (")
    assert "W=1 every dtype; W=2 int64, float32, float64; W=3-5 every dtype;" in words(lines[-4:-2])


def test_the_space_of_a_contract() -> None:
    plain = Coverage.for_contract(Contract(grad="sum", world_sizes=(2, 3)), dtypes=DTYPES)
    assert (plain.world_sizes, plain.dtypes, plain.grad, plain.groups, plain.ragged, plain.ndims) == (
        (2, 3), DTYPES, True, False, True, (1, 4))
    assert plain.expected()["raggedness"] == ("one rank", "equal", "ragged", "zero-length rank", "all empty")
    stacked = Coverage.for_contract(Contract(output="stack", groups=True, dims="0", dtypes=("int64",)))
    assert (stacked.dtypes, stacked.grad, stacked.ragged, stacked.ndims) == (("int64",), False, False, (0, 4))
    expected = stacked.expected()
    assert expected["raggedness"] == ("one rank", "equal", "all empty") and expected["dim"] == ("0",)
    assert expected["ndim"][0] == "0" and "cotangent" not in expected
    assert expected["groups"] == ("one group", "several groups", "idle ranks", "interleaved groups")
    reduction = Coverage.for_contract(Contract(collective="reduce-scatter", grad="adjoint"))
    assert reduction.expected()["values"] == ("iota", "padding", "normal")  # never blamed for special values


def test_a_space_fully_reached_says_so() -> None:
    coverage = Coverage(world_sizes=(1, 1), dtypes=("float32",), dims="0", ragged=False)
    for ndim in (1, 2, 3, 4):
        for layout, values in (("contiguous", "iota"), ("transposed", "padding"), ("strided", "special"),
                               ("offset", "random")):
            coverage.record(Case(ranks=(RankSpec((300,) + (1,) * (ndim - 1), layout=layout, values=values),)))
            coverage.record(Case(ranks=(RankSpec((0,) * ndim),)))
            coverage.record(Case(ranks=(RankSpec((2,) * ndim),)))
            coverage.record(Case(ranks=(RankSpec((2,) * (ndim - 1) + (16,)),)))
    assert coverage.never_reached() == []
    assert coverage.summary().splitlines()[-3].startswith("never reached: nothing")
    assert coverage.summary().splitlines()[-2].startswith("pairs of path axes: ")  # these cases pair few values


# ---------------------------------------------------------------------------------------------
# the page


class _Page(HTMLParser):
    """Checks that every opened tag is closed in order, and reads the matrix cells."""

    VOID = {"meta", "br", "img", "hr", "input", "link"}

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.errors: list[str] = []
        self.cells: dict[tuple[int, str], str] = {}
        self.ids: set[str] = set()
        self.links: set[str] = set()
        self.text: list[str] = []
        self._cell: tuple[int, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "a" and found.get("href"):
            self.links.add(str(found["href"]))
        if tag == "td" and "data-w" in found:
            self._cell = (int(str(found["data-w"])), str(found["data-dtype"]))
            self.cells[self._cell] = ""
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.open[-1] if self.open else None}>")
            return
        self.open.pop()
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self.cells[self._cell] += data


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.open == [], (parser.errors, parser.open)
    return parser


def test_the_page_is_well_formed_and_shows_the_matrix_and_the_findings(tmp_path: Path) -> None:
    coverage = Coverage(world_sizes=(1, 3), dtypes=DTYPES, grad=True)
    for example in [case(1), case(2, 3), case(2, 3), case(1, 1, 1, dtype="int64")]:
        coverage.record(example)
    failing = case(0, 1, 2, dtype="bfloat16")
    coverage.record(failing, failed="values")
    header = {"status": "finished", "target": "pkg.gather:<mine>", "contract": "ragged dims=any grad=sum",
              "backend/device": "gloo/cpu", "torch": "2.13.0", "seed": "7", "duration": "3 s", "examples": "5"}

    page = parse(coverage_page.render(coverage, header, [finding(failing)]))
    assert page.cells[1, "float32"] == "1" and page.cells[2, "float32"] == "2" and page.cells[3, "int64"] == "1"
    assert page.cells[3, "bfloat16"].startswith("1") and "✗ 1 · #1" in page.cells[3, "bfloat16"]
    assert page.cells[2, "bfloat16"] == "0"  # in the space, never reached
    assert len(page.cells) == 3 * len(DTYPES)
    assert "finding-1" in page.ids and "#finding-1" in page.links
    text = "".join(page.text)
    assert failing.describe() in text and "python .gather-harness/repros/pkg.gather/values.py" in text
    assert "pkg.gather:<mine>" in text and "<lambda>" in text  # escaped, shown as written
    assert {f"axis-{axis.replace(' ', '-')}" for axis in AXES if axis not in ("W", "dtype")} <= page.ids

    coverage_page.write(tmp_path / "page" / "coverage.html", coverage, {**header, "status": "running"}, [])
    written = (tmp_path / "page" / "coverage.html").read_text()
    assert 'http-equiv="refresh"' in written and "no counterexample yet" in written
    assert parse(written).cells[3, "bfloat16"].startswith("1")
    assert [p.name for p in (tmp_path / "page").iterdir()] == ["coverage.html"]  # no partial file left


def test_the_page_folds_world_sizes_never_reached_into_one_row() -> None:
    coverage = Coverage(world_sizes=(1, 64), dtypes=DTYPES)
    coverage.record(case(1))
    page = parse(coverage_page.render(coverage, {"target": "pkg:gather"}, []))
    assert list(page.cells) == [(1, dtype) for dtype in ("int64", "bfloat16", "float32", "float64")]
    assert "W=2-64" in "".join(page.text)


def test_events_name_every_axis_value_of_a_case() -> None:
    """The ``hypothesis.event()`` labels come from the same axes as the counts."""
    case = Case(
        ranks=(
            RankSpec((2, 0), layout="strided", values="special", seed=3, cotangent="floats"),
            RankSpec((2, 300), cotangent_layout="transposed"),
        ),
        dim=-1,
        dtype="float16",
        grad="mean",
    )
    assert events(case) == [
        "W=2", "dtype=float16", "ndim=2", "dim=-1", "dim kind=negative", "raggedness=zero-length rank",
        "zero-size dim=no", "long rank=yes", "activation=no", "layout=contiguous", "layout=strided", "layout=mixed",
        "values=iota", "values=special", "groups=world", "output=tensor", "cotangent=ints", "cotangent=floats",
        "cotangent layout=contiguous", "cotangent layout=transposed", "cotangent layout=mixed",
    ]
    assert "raggedness=all empty" in events(Case(ranks=(RankSpec((0, 3)), RankSpec((0, 3)))))


# -- on real runs ---------------------------------------------------------------------------------


def test_a_checks_coverage_counts_every_example_it_ran(pool) -> None:
    """A run restricted to W=2 and float32: every example lands in that one cell, none elsewhere."""
    report = run_check("harness.ragged:all_gather_ragged", Contract(dtypes=("float32",), world_sizes=(2, 2)),
                       max_examples=30, timeout_s=CASE_TIMEOUT_S, pool=pool, seed=3)
    assert report.verdict == "pass" and report.examples == 30
    assert report.coverage.examples == report.examples
    assert {key for key, tally in report.coverage.cells.items() if tally.examples} == {(2, "float32")}
    assert report.coverage.cell(2, "float32") == (30, 0)


@pytest.mark.slow
def test_a_planted_failure_lands_in_its_dtypes_column(pool) -> None:
    report = run_check("tests.planted.bugs:complex64_drops_imaginary", Contract(), max_examples=100, timeout_s=CASE_TIMEOUT_S,
                       pool=pool, seed=5)
    assert [finding.case.dtype for finding in report.findings] == ["complex64"]
    failing = {dtype for (_, dtype), tally in report.coverage.cells.items() if tally.failures}
    assert failing == {"complex64"}
    assert report.coverage.examples == report.examples + report.shrink_steps


def test_check_writes_the_page_and_prints_the_summary(pool, tmp_path: Path, capsys) -> None:
    page = tmp_path / "cov.html"
    status = cli.main(["check", "harness.ragged:all_gather_ragged", "--max-examples", "20", "--world-sizes", "1-2",
                       "--html", str(page)])
    out = capsys.readouterr().out
    assert status == 0
    assert "coverage: 20 cases run" in out and f"coverage page: {page}" in out
    parsed = parse(page.read_text())  # well-formed, or it fails here
    assert parsed.cells[(1, "float32")] and parsed.cells[(2, "float32")]
    assert int(parsed.cells[(1, "float32")].split()[0]) + int(parsed.cells[(2, "float32")].split()[0]) >= 1
