"""The strategies of a case: dtypes, rank specs and whole cases within a contract.

Every public function checks its arguments when it is called, before anything is drawn, and
raises :class:`harness.core.errors.UsageError` naming the argument, its value and the fix.
Choices are ordered simplest first, so a failing case shrinks toward ``float32`` and contiguous
``iota`` inputs with ``ints`` cotangents, on the geometry :mod:`harness.strategies._shapes`
shrinks; the strata's schedule over them is :mod:`harness.strategies._strata`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import random

from harness.strategies._shapes import (
    _EQUAL,
    _NDIM,
    Like,
    RaggedShapes,
    _composite_named,
    _one_of,
    _ragged_shapes,
    _shape_args,
    group_layout,
)
from harness.strategies._validation import (
    check_choice,
    check_int,
    check_names,
)
from harness.strategies.space import LONG_LENGTH
from hypothesis import strategies as st

from harness.core.case import ALL_RECIPES, COTANGENT_LAYOUTS, COTANGENT_RECIPES, LAYOUTS, VALUE_RECIPES, Case, RankSpec
from harness.core.case import recipes_for as case_recipes
from harness.core.contract import ALL_DTYPES, BACKENDS, DEVICES, DIFFERENTIABLE_DTYPES, Contract, mesh_layout
from harness.core.errors import UsageError
from harness.core.outputs import OUTPUTS

__all__ = [
    "SIMPLEST_DTYPES",
    "cases",
    "dtypes",
    "rank_specs",
    "simplest_first",
]

#: Every dtype, simplest first: the order a failing case's dtype shrinks along.
SIMPLEST_DTYPES: tuple[str, ...] = (
    "float32", "float64", "int64", "int32", "uint8", "int8", "int16", "bool",
    "float16", "bfloat16", "complex64", "complex128",
)
assert sorted(SIMPLEST_DTYPES) == sorted(ALL_DTYPES)

#: Value recipes whose bits depend on the seed (every cotangent recipe reads it too).
_SEEDED_VALUES = frozenset({"special", "random", "normal"})
_SEEDS = st.integers(0, 2**32 - 1)







# ---------------------------------------------------------------------------------------------
# world sizes and lengths
















# ---------------------------------------------------------------------------------------------
# shapes
























# ---------------------------------------------------------------------------------------------
# dtypes and rank specs


def dtypes(*, names: tuple[str, ...] = ALL_DTYPES) -> st.SearchStrategy[str]:
    """Dtype names from ``names``, drawn and shrunk in :data:`SIMPLEST_DTYPES` order.

    - ``names`` (default: all twelve): the dtype names to draw from, in any order.

    Examples shrink toward ``float32``, then ``float64``, the ints, ``bool``, the half
    floats and complex last.
    """
    return st.sampled_from(simplest_first(check_names("names", names, ALL_DTYPES)))


def simplest_first(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` in :data:`SIMPLEST_DTYPES` order (the order dtypes shrink along)."""
    return tuple(name for name in SIMPLEST_DTYPES if name in names)


def rank_specs(shape: tuple[int, ...]) -> st.SearchStrategy[RankSpec]:
    """What one rank holds for input shape ``shape``: layout, value recipe, seed, cotangent.

    - ``shape``: the rank's input shape (at least one dim, no negative sizes).

    Layouts and recipes are drawn in the order of ``harness.core.case`` (simplest first), the seed
    shrinks toward 0.  Examples shrink toward ``RankSpec(shape)``: a contiguous ``iota``
    input, an ``ints`` cotangent, seed 0.
    """
    if (
        not isinstance(shape, (tuple, list))
        or not shape
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        raise UsageError(f"shape={shape!r} should be a non-empty tuple of sizes >= 0, e.g. shape=(3, 2)")
    return _rank_specs(tuple(shape))


#: (cotangent, cotangent_layout) combinations, simplest first.
_COTANGENT_TRAITS = tuple(itertools.product(COTANGENT_RECIPES, COTANGENT_LAYOUTS))
#: What a rank holds besides its shape and seed: (layout, values, cotangent, cotangent_layout),
#: in two choices.  Few on purpose: Hypothesis's shrinker deletes a list element only while
#: it spans few choices (measured with this Hypothesis: a rank of 5 choices -- list flag,
#: two for the length, these two -- shrinks; 6 or more do not), and deleting ranks is how a
#: case shrinks ``(0,), (0,), (2,) strided`` to ``(2,) strided``.  The seed is drawn once
#: per case for the same reason; the recipes mix in the rank, so ranks still differ.
RankTraits = tuple[str, str, str, str]


def _rank_traits(values: tuple[str, ...]) -> st.SearchStrategy[RankTraits]:
    """(layout, values) and (cotangent, cotangent_layout) combinations, simplest first."""
    inputs = tuple(itertools.product(LAYOUTS, values))
    return st.tuples(st.sampled_from(inputs), st.sampled_from(_COTANGENT_TRAITS)).map(lambda drawn: drawn[0] + drawn[1])


_RANK_TRAITS = _rank_traits(VALUE_RECIPES)


def _rank_spec(shape: tuple[int, ...], traits: RankTraits, seed: int) -> RankSpec:
    layout, values, cotangent, cotangent_layout = traits
    return RankSpec(shape, layout=layout, values=values, seed=seed, cotangent=cotangent,
                    cotangent_layout=cotangent_layout)


def _rank_specs(shape: tuple[int, ...]) -> st.SearchStrategy[RankSpec]:
    return st.tuples(_RANK_TRAITS, _SEEDS).map(lambda drawn: _rank_spec(shape, *drawn))


def _drop_unread(spec: RankSpec, grad: str) -> RankSpec:
    """``spec`` with the fields a case never reads reset, so cases print and store cleanly.

    Rank specs always draw every field: then every dtype costs the same choices and a
    failing case shrinks along the dtype order, not toward dtypes without gradients.
    """
    if grad != "none":
        return spec
    seed = spec.seed if spec.values in _SEEDED_VALUES else 0
    return RankSpec(spec.shape, layout=spec.layout, values=spec.values, seed=seed)


# ---------------------------------------------------------------------------------------------
# cases


def cases(
    *,
    contract: Contract,
    dtypes: tuple[str, ...] | None = None,
    backend: str = "gloo",
    device: str = "cpu",
    max_length: int = 300,
    max_elements: int = 4096,
    values: tuple[str, ...] | None = None,
    long_rank: bool = False,
    min_ndim: int = 1,
    like: Like | None = None,
) -> st.SearchStrategy[Case]:
    """In-contract cases for a variant with ``contract``.

    - ``contract``: the variant's :class:`~harness.core.contract.Contract`; its ``world_sizes``,
      ``ragged``, ``dims`` and ``ndims`` shape the draws (a re-layout's: its gather dim, and a
      scatter dim chosen per case, :func:`as_collective`), its ``grad`` becomes ``case.grad``, its
      ``output`` becomes ``case.output`` (``auto`` reads as ``tensor``; ``stack`` also draws
      0-d inputs), and with ``groups`` every case also draws a group layout; with
      ``optional_group`` every case draws whether the target is given a group at all (then
      its layout, or without ``groups`` the world group, ``case.world_group``).
    - ``dtypes`` (default None: ``contract.dtypes``): the dtype names to draw; pass the
      contract's dtypes already intersected with what the backend really supports.
    - ``backend`` (default ``"gloo"``), ``device`` (default ``"cpu"``): copied into the case.
    - ``max_length`` (default 300), ``max_elements`` (default 4096): as in :func:`ragged_shapes`.
    - ``values`` (default None: every recipe of the contract's collective, :func:`recipes_for`):
      the value recipes ranks draw from.
    - ``long_rank`` (default False): 1-d cases in which some rank holds at least
      :data:`~harness.strategies.space.LONG_LENGTH` elements (shrinking keeps one that long).
    - ``min_ndim`` (default 1, at most 4): cases of at least this many dims; 2 or more is where
      input and cotangent layouts differ from a contiguous one (a transposed 1-d tensor is one).
    - ``like`` (default None): cases held to a :class:`Like`'s raggedness, zero-size dim and
      group layout (a failing stratum's path), at its fewest ranks or more.

    ``case.grad`` is ``"none"`` for dtypes without gradients (ints, bool).  Every rank draws
    its own layout, value recipe and cotangent recipe; cotangents differ on every rank even
    with one recipe, as ``make_cotangent`` mixes in the rank.  Examples shrink toward one
    rank holding ``(0,)`` of the simplest dtype given, e.g.
    ``Case(ranks=(RankSpec(shape=(0,)),), dtype='float32', grad=contract.grad)``.
    """
    _check_contract(contract)
    names = contract.dtypes if dtypes is None else check_names("dtypes", dtypes, ALL_DTYPES)
    ragged = contract.ragged_cases
    check_int("min_ndim", min_ndim, at_least=1, at_most=1 if long_rank else _NDIM[1], example=2)
    low, high = contract.world_sizes
    if like is not None:
        low, min_ndim = min(max(low, like.fewest_ranks()), high), max(min_ndim, 2 if like.zero_size_dim else 1)
    fewest, most = contract.ndim_range or _NDIM
    ndims = (1, 1) if long_rank else (min(max(min_ndim, fewest), most), most)
    shape_args = _shape_args((low, high), ragged, ndims, contract.drawn_dims, max_length, max_elements)
    values = recipes_for(contract) if values is None else check_names("values", values, ALL_RECIPES)
    traits = _RANK_TRAITS if values == VALUE_RECIPES else _rank_traits(values)
    shapes = _ragged_shapes(*shape_args, traits, like)
    if long_rank:
        shapes = shapes.map(lambda drawn: (_with_a_long_rank(drawn[0], ragged), drawn[1]))
    return _as_drawn(_cases(shapes, simplest_first(names), contract.grad, *_check_target(backend, device),
                            output=contract.read_as.name, groups=contract.groups, mesh=contract.mesh,
                            optional_group=contract.optional_group and not contract.mesh,
                            group_kind=like.groups if like is not None else None),
                     contract.with_(ragged=False) if like is not None and like.raggedness in _EQUAL else contract)


def recipes_for(contract: Contract) -> tuple[str, ...]:
    """The value recipes a contract's cases draw (:func:`harness.core.case.recipes_for`)."""
    return case_recipes(contract.kind.reduces, contract.op)


def as_collective(case: Case, contract: Contract) -> Case:
    """A case drawn as a gather's, made the contract's collective: a gather's per-rank lengths
    are a reduce-scatter's slots as they are; in an all-to-all each rank sends its length split
    over its group's members (:func:`_sends`); an all-reduce's members take one shape."""
    ranks = case.ranks
    if contract.relayout:
        return _relaid(case, contract)
    if contract.collective == "all-to-all":
        ranks = tuple(_sends(case, r, contract.ragged_cases) for r in range(case.world_size))
    rooted = dataclasses.replace(case, groups=_with_a_root(case, contract.root))
    if not contract.ragged_cases and rooted.is_ragged and not case.is_ragged:  # an idle rank joined the world
        shape = case.ranks[case.layout()[0][0]].shape  # a member's: its filler length would make the case ragged
        ranks = tuple(dataclasses.replace(spec, shape=shape) for spec in ranks)
    case = rooted
    if contract.kind.dimless:
        ranks = tuple(_shaped_as_its_group(case, r) for r in range(case.world_size))
    return dataclasses.replace(case, ranks=ranks, collective=contract.collective, op=contract.op, root=contract.root)


def _with_a_root(case: Case, src: int) -> tuple[tuple[int, ...], ...]:
    """The case's groups that have a member ``src`` (a source or a destination; the others' ranks idle), or
    the world as one group where none has (the contract keeps the world larger than ``src``)."""
    if not src or not case.groups:
        return case.groups
    return tuple(group for group in case.groups if len(group) > src) or (tuple(range(case.world_size)),)


def _shaped_as_its_group(case: Case, rank: int) -> RankSpec:
    """Rank ``rank``'s spec with its group's first member's shape: an all-reduce's members hold one
    shape (drawn equal-only, so this changes only groups drawn apart)."""
    members = case.members(rank)
    spec = case.ranks[rank]
    return dataclasses.replace(spec, shape=case.ranks[members[0]].shape) if members else spec


def _relaid(case: Case, contract: Contract) -> Case:
    """A gather-shaped case as a re-layout's: its dim (where ranks differ) is the gather dim, a
    scatter dim is chosen from rank 0's seed among the others (:meth:`Contract.scatter_dims`), and
    every member of a group sends each member a piece of it as ``torch.tensor_split`` cuts it
    (the first ``H % G`` members one row more); equal-only, its length H is rounded up to a multiple
    of every group's size.  Derived, not drawn, as :func:`_sends` is."""
    choices = contract.scatter_dims(case.ndim, case.dim)
    scatter = choices[random.Random(f"{case.ranks[0].seed}:scatter").randrange(len(choices))]
    axis = scatter % case.ndim
    height = case.ranks[0].shape[axis]
    if not contract.ragged_cases:
        every = math.lcm(*(len(group) for group in case.layout()))
        height = -(-height // every) * every
    ranks = []
    for r, spec in enumerate(case.ranks):
        shape = list(spec.shape)
        shape[axis] = height
        g = len(case.members(r))
        splits = tuple(height // g + (k < height % g) for k in range(g)) if g else ()
        ranks.append(dataclasses.replace(spec, shape=tuple(shape), splits=splits))
    return dataclasses.replace(case, ranks=tuple(ranks), collective=contract.collective, scatter_dim=scatter)


def _sends(case: Case, rank: int, ragged: bool) -> RankSpec:
    """Rank ``rank``'s all-to-all spec: ragged, its length cut at G-1 points drawn from its seed
    (zero-length splits wherever points meet; a rank of length 0 sends nothing); equal, the
    length rounded up to G chunks of one size.  Derived, not drawn: a rank stays a few choices
    for the shrinker (:data:`_RANK_TRAITS`), and a shorter length gives smaller splits."""
    spec = case.ranks[rank]
    members = case.members(rank)
    if not members:
        return spec
    n, g = case.lengths[rank], len(members)
    if ragged:
        rng = random.Random(f"{spec.seed}:{rank}")
        cuts = sorted(rng.randint(0, n) for _ in range(g - 1))
        return dataclasses.replace(spec, splits=tuple(b - a for a, b in zip([0, *cuts], [*cuts, n])))
    chunk = -(-n // g)
    shape = list(spec.shape)
    shape[case.dim % case.ndim] = chunk * g
    return dataclasses.replace(spec, shape=tuple(shape), splits=(chunk,) * g)


def _with_a_long_rank(drawn: RaggedShapes, ragged: bool) -> RaggedShapes:
    """``drawn`` (1-d) with its longest rank, or every rank if equal-only, at least LONG_LENGTH long."""
    lengths = [shape[0] for shape in drawn.shapes]
    longest = lengths.index(max(lengths))
    grown = [max(n, LONG_LENGTH) if (r == longest or not ragged) else n for r, n in enumerate(lengths)]
    return RaggedShapes(shapes=tuple((n,) for n in grown), dim=drawn.dim)


def _check_contract(contract: object) -> None:
    if not isinstance(contract, Contract):
        raise UsageError(
            f"contract={contract!r} should be a harness.core.contract.Contract, e.g. contract=Contract(grad='sum')"
        )


def _check_target(backend: object, device: object) -> tuple[str, str]:
    return check_choice("backend", backend, BACKENDS), check_choice("device", device, DEVICES)


@_composite_named("cases")
def _cases(
    draw: st.DrawFn,
    shapes_and_traits: st.SearchStrategy[tuple[RaggedShapes, tuple[RankTraits, ...]]],
    names: tuple[str, ...],
    grad: str,
    backend: str,
    device: str,
    output: str = "tensor",
    groups: bool = False,
    mesh: bool = False,
    optional_group: bool = False,
    group_kind: str | None = None,
) -> Case:
    drawn, traits = draw(shapes_and_traits)
    dtype = draw(_one_of(names))
    seed = draw(_SEEDS)
    grad = grad if dtype in DIFFERENTIABLE_DTYPES else "none"
    shapes, dim = drawn.shapes, drawn.dim
    if OUTPUTS[output].stacked and draw(_SCALARS):
        shapes, dim = tuple(() for _ in shapes), 0
    # An optional group is passed or not (shrinking toward not); passed, it is a layout with groups.
    passes = not optional_group or (group_kind != "world" if group_kind else draw(st.booleans()))
    if group_kind and not mesh:
        layout = group_layout(group_kind, len(shapes)) if groups else ()
    elif mesh:
        layout = mesh_layout(len(shapes), *draw(_mesh_choice(len(shapes))))
    else:
        layout = _group_layout(draw(_group_labels(len(shapes)))) if groups and passes else ()
    ranks = tuple(_drop_unread(_rank_spec(shape, trait, seed), grad) for shape, trait in zip(shapes, traits))
    world_group = optional_group and passes and not groups
    return Case(ranks=ranks, dim=dim, dtype=dtype, grad=grad, backend=backend, device=device, groups=layout,
                output=output, world_group=world_group)


#: For ``stack`` results, about one case in five has 0-d inputs (a stack of scalars).
_SCALARS = st.integers(0, 4).map(lambda k: k == 4)


@functools.cache
def _group_labels(world: int) -> st.SearchStrategy[list[int]]:
    """One label per rank: 0..W-1 name a group, W leaves the rank idle; all 0 is the world."""
    return st.lists(st.integers(0, world), min_size=world, max_size=world)


@functools.cache
def _mesh_choice(world: int) -> st.SearchStrategy[tuple[int, bool]]:
    """A group size n dividing W (largest first, so shrinking goes toward one group: the world)
    and whether the groups are a mesh's columns (strided) rather than its rows (contiguous)."""
    sizes = [n for n in range(world, 0, -1) if world % n == 0]
    return st.tuples(st.sampled_from(sizes), st.booleans())


def _group_layout(labels: list[int]) -> tuple[tuple[int, ...], ...]:
    """Labels as disjoint groups ordered by their first rank; everyone idle counts as the world.

    Shrinking moves labels toward 0, so a failing layout shrinks toward the world group.
    """
    world = len(labels)
    members: dict[int, list[int]] = {}
    for rank, label in enumerate(labels):
        if label < world:
            members.setdefault(label, []).append(rank)
    groups = sorted(tuple(ranks) for ranks in members.values())
    return tuple(groups) or (tuple(range(world)),)


def _as_drawn(drawn: st.SearchStrategy[Case], contract: Contract) -> st.SearchStrategy[Case]:
    """Gather-shaped cases as the contract's collective draws them (:func:`as_collective`)."""
    return drawn if contract.collective == "gather" else drawn.map(functools.partial(as_collective, contract=contract))
