"""The strategies: argument validation, what they reach, how they shrink, what they draw."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from random import Random
from typing import Any

import pytest
from harness.strategies import (
    SIMPLEST_DTYPES,
    Like,
    RaggedShapes,
    _strata,
    cases,
    contract_violations,
    dtypes,
    group_layout,
    has_misuse,
    lengths,
    misuse_cases,
    ragged_shapes,
    rank_specs,
    world_sizes,
)
from harness.strategies.space import Space
from harness.strategies.space import axes as coverage_axes
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from harness import strategies
from harness.core.case import COTANGENT_LAYOUTS, LAYOUTS, VALUE_RECIPES, Case, RankSpec
from harness.core.contract import ALL_DTYPES, DIFFERENTIABLE_DTYPES, Contract, UsageError
from harness.search.coverage import Coverage

#: A contract that lets the strategies reach everything: ragged, any dim, W up to 8, grads.
OPEN = Contract(grad="sum", world_sizes=(1, 8))
#: A contract with every way to be misused: equal-only, dim 0 only, float32 only.
NARROW = Contract(ragged=False, dims="0", dtypes=("float32",), grad="sum")

#: Explicit phases: a profile without shrinking must not change what these tests find.
_FIND = settings(max_examples=3000, database=None, deadline=None, phases=[Phase.generate, Phase.shrink])
#: Reaching needs no minimal example: stop at the first one found.
_REACH = settings(_FIND, phases=[Phase.generate])
_DRAW = settings(max_examples=60, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _find(strategy: st.SearchStrategy[Any], condition: Callable[[Any], bool], *, shrink: bool = True) -> Any:
    """``hypothesis.find``, seeded so that the tests are deterministic."""
    return find(strategy, condition, settings=_FIND if shrink else _REACH, random=Random(0))


# ---------------------------------------------------------------------------------------------
# argument validation


def _show(value: Any) -> str:
    """Short test ids: contracts by their one-line description, the full dtype list by name."""
    if isinstance(value, Contract):
        return f"Contract<{value.describe()}>"
    return "ALL_DTYPES" if value == ALL_DTYPES else repr(value)


def _bad(culprit: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A table row: ``function(*args, **kwargs)`` must raise UsageError naming ``culprit=``."""
    shown = [_show(a) for a in args] + [f"{k}={_show(v)}" for k, v in kwargs.items()]
    return pytest.param(culprit, function, args, kwargs, id=f"{function.__name__}({', '.join(shown)})")


BAD_ARGUMENTS = [
    _bad("max_value", world_sizes, min_value=3, max_value=2),
    _bad("min_value", world_sizes, min_value=0),
    _bad("max_value", world_sizes, max_value=65),
    _bad("min_value", world_sizes, min_value=1.5),
    _bad("min_value", world_sizes, min_value=True),
    _bad("names", dtypes, names=()),
    _bad("names", dtypes, names="float32"),
    _bad("names", dtypes, names=("float32", "float33")),
    _bad("world_sizes", lengths, world_sizes=(3, 2)),
    _bad("world_sizes", lengths, world_sizes=(0, 2)),
    _bad("world_sizes", lengths, world_sizes=(1, 65)),
    _bad("world_sizes", lengths, world_sizes=4),
    _bad("ragged", lengths, ragged="yes"),
    _bad("max_length", lengths, max_length=-1),
    _bad("max_total", lengths, max_total=-1),
    _bad("ndim", ragged_shapes, ndim=(0, 2)),
    _bad("ndim", ragged_shapes, ndim=(3, 2)),
    _bad("dims", ragged_shapes, dims="first"),
    _bad("dims", ragged_shapes, dims="-2", ndim=(1, 4)),
    _bad("dims", ragged_shapes, dims=0),
    _bad("ndim", ragged_shapes, dims="nonzero", ndim=(1, 1)),
    _bad("max_elements", ragged_shapes, max_elements=-1),
    _bad("shape", rank_specs, ()),
    _bad("shape", rank_specs, (2, -1)),
    _bad("contract", cases, contract="ragged"),
    _bad("dtypes", cases, contract=OPEN, dtypes=()),
    _bad("dtypes", cases, contract=OPEN, dtypes=("float33",)),
    _bad("backend", cases, contract=OPEN, backend="mpi"),
    _bad("device", cases, contract=OPEN, device="tpu"),
    _bad("max_length", cases, contract=OPEN, max_length=-5),
    _bad("contract", misuse_cases, contract=Contract(), dtypes_supported=ALL_DTYPES),
    _bad("dtypes_supported", misuse_cases, contract=NARROW, dtypes_supported="float32"),
    _bad("dtypes_supported", has_misuse, NARROW, ("complex32",)),
]


@pytest.mark.parametrize("culprit, function, args, kwargs", BAD_ARGUMENTS)
def test_bad_arguments_raise_usage_error_naming_the_argument(
    culprit: str, function: Callable[..., Any], args: tuple, kwargs: dict
) -> None:
    # Raised by the call itself: nothing is drawn.
    with pytest.raises(UsageError, match=f"{culprit}=") as raised:
        function(*args, **kwargs)
    assert len(str(raised.value)) < 300, "one readable line"


def test_world_sizes_message_is_hypothesis_style() -> None:
    with pytest.raises(UsageError, match="Cannot have max_value=2 < min_value=3"):
        world_sizes(min_value=3, max_value=2)


def test_misuse_of_open_contract_says_why_and_the_fix() -> None:
    with pytest.raises(UsageError, match="claims every dtype, any dim and ragged input; drop --probe-misuse"):
        misuse_cases(contract=Contract(), dtypes_supported=ALL_DTYPES)
    assert not has_misuse(Contract(), ALL_DTYPES)


def test_public_names_are_exported_and_documented() -> None:
    for name in strategies.__all__:
        assert getattr(strategies, name).__doc__, name
    assert repr(ragged_shapes(ndim=(2, 2))).startswith("ragged_shapes(")


# ---------------------------------------------------------------------------------------------
# reach: every corner of the case space comes up


def _any_rank(predicate: Callable[[RankSpec], bool]) -> Callable[[Case], bool]:
    return lambda case: any(predicate(spec) for spec in case.ranks)


REACH = {
    "W=1": lambda c: c.world_size == 1,
    "W=odd>1": lambda c: c.world_size in (3, 5, 7),
    "W=8": lambda c: c.world_size == 8,
    "zero-length rank": lambda c: 0 in c.lengths and sum(c.lengths) > 0,
    "all empty": lambda c: c.world_size >= 2 and all(math.prod(s.shape) == 0 for s in c.ranks),
    "length>=256": lambda c: max(c.lengths) >= 256,
    "ndim=4": lambda c: c.ndim == 4,
    "negative dim": lambda c: c.dim < 0,
    "last dim of 4-d": lambda c: c.ndim == 4 and c.dim % 4 == 3,
    "zero-size other dim": lambda c: any(n == 0 for i, n in enumerate(c.ranks[0].shape) if i != c.dim % c.ndim),
    "mixed cotangents": lambda c: len({s.cotangent for s in c.ranks}) == 2,
    "mixed value recipes": lambda c: len({s.values for s in c.ranks}) >= 3,
    "no grad for ints": lambda c: c.dtype == "int32" and c.grad == "none",
    **{f"dtype={name}": (lambda c, name=name: c.dtype == name) for name in ALL_DTYPES},
    **{f"layout={name}": _any_rank(lambda s, name=name: s.layout == name) for name in LAYOUTS},
    **{f"values={name}": _any_rank(lambda s, name=name: s.values == name) for name in VALUE_RECIPES},
    **{
        f"cotangent_layout={name}": _any_rank(lambda s, name=name: s.cotangent_layout == name)
        for name in COTANGENT_LAYOUTS
    },
}


@pytest.mark.parametrize("condition", REACH.values(), ids=REACH.keys())
def test_cases_reach(condition: Callable[[Case], bool]) -> None:
    _find(cases(contract=OPEN), condition, shrink=False)


def test_default_world_sizes_reach_four() -> None:
    _find(cases(contract=Contract()), lambda c: c.world_size == 4, shrink=False)


@pytest.mark.parametrize("kind", ["ragged", "dim", "dtype"])
def test_misuse_cases_reach_each_kind(kind: str) -> None:
    drawn = misuse_cases(contract=NARROW, dtypes_supported=ALL_DTYPES)
    _find(drawn, lambda c: kind in contract_violations(c, NARROW), shrink=False)


# ---------------------------------------------------------------------------------------------
# shrinking: the minimal examples can be named in advance


def test_case_shrinks_to_fewest_ranks_dims_and_shortest_lengths() -> None:
    found = _find(cases(contract=OPEN), lambda c: c.world_size >= 3 and max(c.lengths) >= 5)
    ranks = (RankSpec((0,)), RankSpec((0,)), RankSpec((5,)))
    assert found == Case(ranks=ranks, dim=0, dtype="float32", grad="sum")


@pytest.mark.parametrize(
    "condition, minimal",
    [
        (lambda c: c.dtype != "float32", Case(ranks=(RankSpec((0,)),), dtype="float64", grad="sum")),
        (lambda c: c.dtype == "float16", Case(ranks=(RankSpec((0,)),), dtype="float16", grad="sum")),
        (lambda c: c.dtype == "int8", Case(ranks=(RankSpec((0,)),), dtype="int8", grad="none")),
        (_any_rank(lambda s: s.layout != "contiguous"), Case(ranks=(RankSpec((0,), layout="transposed"),), grad="sum")),
        (_any_rank(lambda s: s.values == "special"), Case(ranks=(RankSpec((0,), values="special"),), grad="sum")),
        (lambda c: c.ndim >= 2 and c.dim < 0, Case(ranks=(RankSpec((1, 0)),), dim=-1, grad="sum")),
        (
            lambda c: len({s.cotangent for s in c.ranks}) == 2,
            Case(ranks=(RankSpec((0,)), RankSpec((0,), cotangent="floats")), grad="sum"),
        ),
    ],
    ids=["dtype!=float32", "float16", "int8", "non-contiguous", "special values", "negative dim", "mixed cotangents"],
)
def test_case_shrinks_to_simplest(condition: Callable[[Case], bool], minimal: Case) -> None:
    assert _find(cases(contract=OPEN), condition) == minimal


def test_lengths_shrink_by_dropping_ranks() -> None:
    assert _find(lengths(), lambda ns: len(ns) >= 3 and max(ns) >= 5) == (0, 0, 5)
    assert _find(lengths(ragged=False, world_sizes=(1, 8)), lambda ns: len(ns) >= 3 and ns[0] >= 5) == (5, 5, 5)


def test_misuse_shrinks_to_one_rank_of_the_simplest_other_dtype() -> None:
    found = _find(misuse_cases(contract=NARROW, dtypes_supported=ALL_DTYPES), lambda c: True)
    assert found == Case(ranks=(RankSpec((0,)),), dtype="float64")


def test_dtypes_shrink_in_simplest_order() -> None:
    assert _find(dtypes(names=tuple(reversed(ALL_DTYPES))), lambda d: True) == "float32"
    assert _find(dtypes(names=("bool", "complex64", "int8")), lambda d: d != "int8") == "bool"
    assert SIMPLEST_DTYPES[0] == "float32" and sorted(SIMPLEST_DTYPES) == sorted(ALL_DTYPES)


# ---------------------------------------------------------------------------------------------
# every draw is valid


@pytest.mark.parametrize(
    "contract, names",
    [
        (OPEN, None),
        (Contract(ragged=False, dims="0", grad="mean", world_sizes=(2, 5)), None),
        (Contract(grad="local"), ("int64", "float16", "complex64")),
        (Contract(ragged=False, dims="-3", grad="local"), None),
        (Contract(collective="reduce-scatter", dims="2", grad="adjoint"), None),
    ],
    ids=["open", "equal-only-dim0", "given-dtypes", "fixed-dim-3", "reduce-scatter-dim2"],
)
def test_every_case_is_in_contract(contract: Contract, names: tuple[str, ...] | None) -> None:
    @_DRAW
    @given(cases(contract=contract, dtypes=names, max_elements=500))
    def check(case: Case) -> None:
        low, high = contract.world_sizes
        assert low <= case.world_size <= high
        assert sum(math.prod(spec.shape) for spec in case.ranks) <= 500
        assert max(case.lengths) <= 300
        assert 1 <= case.ndim <= 4 and -case.ndim <= case.dim < case.ndim
        assert case.dtype in (names or contract.dtypes)
        assert case.grad == (contract.grad if case.dtype in DIFFERENTIABLE_DTYPES else "none")
        assert contract_violations(case, contract) == ()
        if contract.dims != "any":  # one fixed dim: always that one, on inputs that have it
            assert case.dim == int(contract.dims) and case.ndim >= (case.dim + 1 if case.dim >= 0 else -case.dim)
        assert Case.from_json(case.to_json()) == case

    check()


def test_every_misuse_case_is_out_of_contract_in_exactly_one_way() -> None:
    supported = tuple(name for name in ALL_DTYPES if name != "int16")

    @_DRAW
    @given(misuse_cases(contract=NARROW, dtypes_supported=supported))
    def check(case: Case) -> None:
        (kind,) = contract_violations(case, NARROW)
        assert case.grad == "none"
        if kind != "dtype":
            assert case.dtype == "float32"

    check()


def test_a_fixed_dims_misuse_cases_name_another_dim() -> None:
    contract = Contract(dims="-1", dtypes=("float32",))

    @_DRAW
    @given(misuse_cases(contract=contract, dtypes_supported=ALL_DTYPES))
    def check(case: Case) -> None:
        kinds = contract_violations(case, contract)
        assert len(kinds) == 1
        if kinds == ("dim",):
            assert case.ndim >= 2 and case.dim % case.ndim != case.ndim - 1

    check()


@pytest.mark.parametrize("dims, ndims, ndim_range", [("-3", None, (3, 4)), ("2", None, (3, 4)), ("0", None, (1, 4)),
                                                      ("-1", (2, 3), (2, 3)), ("any", None, (1, 4))])
def test_a_fixed_dim_draws_the_inputs_that_have_it(dims: str, ndims: tuple[int, int] | None,
                                                   ndim_range: tuple[int, int]) -> None:
    assert Contract(dims=dims, ndims=ndims).ndim_range == ndim_range


@pytest.mark.parametrize("dims, ndims, message", [
    ("4", None, "--dims: expected any or a dim of a 1-4-d input (-4 to 3), got '4'"),
    ("last", None, "--dims: expected any or a dim"),
    ("3", (1, 3), "--dims 3 --ndims 1-3: no input of those dims has dim 3"),
])
def test_a_fixed_dim_no_drawn_input_has_is_refused(dims: str, ndims: tuple[int, int] | None, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        Contract(dims=dims, ndims=ndims)


def test_misuse_kinds_follow_the_contract() -> None:
    assert has_misuse(Contract(dtypes=("float32",)), ALL_DTYPES)
    assert has_misuse(Contract(ragged=False), ALL_DTYPES)
    # One rank leaves no room for ragged lengths.
    assert not has_misuse(Contract(ragged=False, world_sizes=(1, 1)), ALL_DTYPES)
    with pytest.raises(UsageError, match="world_sizes=\\(1, 1\\) leaves no room for ragged ranks"):
        misuse_cases(contract=Contract(ragged=False, world_sizes=(1, 1)), dtypes_supported=ALL_DTYPES)


@_DRAW
@given(lengths(world_sizes=(2, 6), max_length=50, max_total=60))
def test_lengths_respect_the_budget(drawn: tuple[int, ...]) -> None:
    assert 2 <= len(drawn) <= 6 and sum(drawn) <= 60 and max(drawn) <= 50


@_DRAW
@given(lengths(ragged=False, world_sizes=(1, 8), max_total=100))
def test_equal_lengths_are_equal(drawn: tuple[int, ...]) -> None:
    assert len(set(drawn)) == 1 and sum(drawn) <= 100


@_DRAW
@given(ragged_shapes(ndim=(2, 3), dims="nonzero", max_elements=200))
def test_ragged_shapes_agree_off_dim(drawn: RaggedShapes) -> None:
    n = len(drawn.shapes[0])
    assert 2 <= n <= 3 and drawn.dim % n != 0
    off = {tuple(s for i, s in enumerate(shape) if i != drawn.dim % n) for shape in drawn.shapes}
    assert len(off) == 1 and sum(math.prod(shape) for shape in drawn.shapes) <= 200



#: How many cases of each stratum's strategy are drawn to see that none has an undrawn dtype.
STRATUM_DRAWS = 20


@pytest.mark.parametrize("collective", ["gather", "reduce-scatter"])
@pytest.mark.slow
def test_every_stratum_shrinks_among_the_dtypes_drawn_only(collective: str) -> None:
    """A failing stratum is shrunk among cases like it; a dtype the backend cannot move (int16 on
    gloo) must never be one of them, or its refusal would be shrunk into a finding against the
    target (measured: a stratum's hang under load shrank to a W=1 int16 "exception").

    :data:`STRATUM_DRAWS` cases a stratum: one drawing from every dtype (the bug) meets an undrawn
    dtype within 10, for every stratum of both collectives (measured with ``random=Random(0)``)."""
    drawn = ("float32", "int64")
    layers = strategies.strata(contract=Contract(collective=collective), dtypes=drawn, backend="gloo", device="cpu",
                               seed=0)
    assert {layer.case.dtype for layer in layers} == set(drawn)
    for layer in layers:
        with pytest.raises(NoSuchExample):
            find(layer.strategy, lambda case: case.dtype not in drawn,
                 settings=settings(_REACH, max_examples=STRATUM_DRAWS), random=Random(0))


@pytest.mark.parametrize("contract", [Contract(collective="gather-to", dst=1, groups=True, ragged=False, world_sizes=(2, 4)),
                                      Contract(collective="scatter", src=1, groups=True, ragged=False, world_sizes=(2, 4))],
                         ids=["gather-to dst=1", "scatter src=1"])
def test_an_equal_only_rooted_contracts_strata_are_never_ragged(contract: Contract) -> None:
    """A layout with no group that holds the root becomes the world: a rank idle before (holding a
    filler length) joins, and takes a member's shape, or the case would be ragged out of contract
    (measured: dist.gather at --dst 1 got a desync of the harness's making)."""
    for seed in range(4):
        for layer in strategies.strata(contract=contract, dtypes=("float32",), backend="gloo", device="cpu", seed=seed):
            assert not layer.case.is_ragged, layer.case.describe()


# -- the pairwise schedule ------------------------------------------------------------------------------

GLOO_DTYPES = tuple(d for d in ALL_DTYPES if d != "int16")
SCHEDULED = {
    "ragged, sum, groups": Contract(grad="sum", groups=True),
    "optional group": Contract(grad="sum", groups=True, optional_group=True),
    "equal-only, dim 0": Contract(ragged=False, dims="0", grad="local"),
    "stack": Contract(output="stack", ragged=False),
    "mesh": Contract(groups=True, mesh=True, grad="sum"),
    "reduce-scatter": Contract(collective="reduce-scatter", grad="adjoint", groups=True),
    "all-to-all": Contract(collective="all-to-all", grad="adjoint"),
    "W=2-8": Contract(world_sizes=(2, 8)),
}


@pytest.mark.parametrize("name", list(SCHEDULED))
def test_the_strata_reach_every_pair_of_path_values(name: str) -> None:
    """Every pair (and triple of raggedness, dim kind and zero-size dim) of values that can hold
    together is held by some stratum's case, as the coverage counts it; the strata of a W=1-4
    space fit in the four fifths of the default 100 examples a run gives them."""
    contract = SCHEDULED[name]
    dtypes = tuple(d for d in contract.dtypes if d in GLOO_DTYPES)
    for seed in (0, 1):
        layers = strategies.strata(contract=contract, dtypes=dtypes, backend="gloo", device="cpu", seed=seed)
        coverage = Coverage.for_contract(contract, dtypes)
        for layer in layers:
            coverage.record(layer.case)
            assert set(coverage_axes(layer.case)["dtype"]) == {layer.path["dtype"]}
        assert coverage.pairs_missing() == [], (name, seed)
        assert coverage.cells_reached()[0] == coverage.cells_reached()[1]
        if contract.world_sizes[1] <= 4:
            assert len(layers) <= 80, (name, len(layers))


@pytest.mark.parametrize("name", ["ragged, sum, groups", "reduce-scatter"])
def test_the_first_rows_asked_for_are_the_whole_schedules_first_rows(name: str) -> None:
    """A search asks only for the strata it runs (``count``), and the schedule is computed that
    far: the rows are the same, asked for first or after the whole schedule, in any order."""
    domain = tuple(Space.for_contract(SCHEDULED[name], GLOO_DTYPES).domain().items())
    covering_rows = strategies.covering_rows
    for seed in (0, 1):
        _strata._schedule.cache_clear()
        first = covering_rows(domain, seed, 5)
        more = covering_rows(domain, seed, 20)
        whole = covering_rows(domain, seed)
        _strata._schedule.cache_clear()
        alone = covering_rows(domain, seed)
        assert len(first) == 5 and len(more) == 20 and len(whole) > 20
        assert first == whole[:5] and more == whole[:20] and whole == alone and covering_rows(domain, seed, 5) == first


def test_a_stratum_holds_the_values_of_its_row() -> None:
    """What a row says is what its case is, on every axis the coverage can read back."""
    contract = SCHEDULED["ragged, sum, groups"]
    for layer in strategies.strata(contract=contract, dtypes=GLOO_DTYPES, backend="gloo", device="cpu", seed=3):
        held = coverage_axes(layer.case)
        for axis, value in layer.path.items():
            assert value in held[axis], (layer.label, axis, held[axis])


@pytest.mark.parametrize("like", [Like(raggedness="equal"), Like(raggedness="zero-length rank"),
                                  Like(raggedness="ragged", groups="idle ranks"), Like(zero_size_dim=True),
                                  Like(raggedness="all empty", groups="interleaved groups")], ids=repr)
def test_cases_like_a_stratum_stay_on_its_path(like: Like) -> None:
    """Searched again after a failure, a stratum's cases keep its raggedness, zero-size dim and
    group layout, and the smallest of them has the fewest ranks that can hold them."""
    contract = Contract(grad="sum", groups=like.groups is not None, world_sizes=(1, 6))
    strategy = cases(contract=contract, dtypes=("float32",), like=like)

    @settings(_REACH, max_examples=60)
    @given(strategy)
    def holds(case: Case) -> None:
        held = coverage_axes(case)
        if like.raggedness is not None:
            assert held["raggedness"] == (like.raggedness,) or like.groups == "idle ranks" and case.world_size == 2
        assert held["zero-size dim"] == (("yes",) if like.zero_size_dim else held["zero-size dim"])
        if like.groups is not None:
            assert like.groups in held["groups"]

    holds()
    assert _find(strategy, lambda case: True).world_size == like.fewest_ranks()


def test_group_layouts_keep_their_kind_at_every_world_size() -> None:
    assert group_layout("several groups", 2) == ((0,), (1,))
    assert group_layout("idle ranks", 2) == ((1,),)
    assert group_layout("interleaved groups", 3) == ((0, 2), (1,))
    assert group_layout("one group", 3) == ((0, 1, 2),) and group_layout("world", 3) == ()


@pytest.mark.parametrize("collective", ["gather", "all-to-all"])
@given(data=st.data())
@settings(_DRAW)
def test_a_rank_taken_away_leaves_a_valid_case_with_its_group_layout(collective: str, data: st.DataObject) -> None:
    """:meth:`Case.without`, as fewest ranks uses it: in an all-to-all the other members stop
    sending the rank their split for it (their inputs shorten by as much); before, an all-to-all
    kept every rank, so a failure met on four ranks was shrunk on four."""
    contract = Contract(collective=collective, groups=True, grad="adjoint" if collective != "gather" else "sum")
    case = data.draw(strategies.cases(contract=contract, dtypes=("float32",)))
    rank = data.draw(st.integers(0, case.world_size - 1))
    smaller = case.without(rank)
    if smaller is None:
        assert case.world_size == 1 or all(group == (rank,) for group in case.groups)
        return
    assert smaller.world_size == case.world_size - 1
    old = [r for r in range(case.world_size) if r != rank]
    for new, before in enumerate(old):
        if collective == "all-to-all" and rank in case.members(before) and case.ranks[before].splits:
            at = case.members(before).index(rank)
            assert smaller.ranks[new].splits == case.ranks[before].splits[:at] + case.ranks[before].splits[at + 1:]
            assert smaller.lengths[new] == case.lengths[before] - case.ranks[before].splits[at]
        else:
            assert smaller.ranks[new] == case.ranks[before]
    assert (case.merged(rank) is None) if collective == "all-to-all" else True


def test_a_mesh_contract_admits_a_meshs_rows_and_columns_only() -> None:
    """What :meth:`harness.search.session._Session.fewest_ranks` keeps for a ``mesh`` contract: a rank
    taken from ``{0,1}+{2,3}`` leaves ``{0}+{1,2}`` or ``{0,1}+{2}``, no mesh's groups (the 2-D mesh
    rows raise on them: that would be a finding of the harness's making)."""
    from harness.core.contract import is_mesh_layout, mesh_layout

    for world in range(1, 9):
        for size in (n for n in range(1, world + 1) if world % n == 0):
            assert is_mesh_layout(mesh_layout(world, size, False), world)
            assert is_mesh_layout(mesh_layout(world, size, True), world)
    case = Case(ranks=(RankSpec((1,)),) * 4, groups=((0, 1), (2, 3)))
    assert [is_mesh_layout(smaller.groups, 3) for smaller in map(case.without, range(4))] == [False] * 4
    assert not is_mesh_layout(((0, 2), (1,)), 3) and is_mesh_layout(((0,), (1,), (2,)), 3)
