"""Strata: typical cases of every dtype with every value class, and of every shape class, run first.

Hypothesis's draws do not spread evenly: over 100 examples a given (dtype, value class) pair
can go unseen, so a bug confined to it (an int64 round trip through float64, bool padding)
was found in one run and missed in the next.  So every run starts with one typical case per
stratum, built deterministically from the run's seed: for every drawn dtype, one case per
value class (full-range ``random`` bits first, then ``special`` values: extremes, the
largest exact float, NaN payloads, signed zeros, subnormals; then ``padding``-like values and
``iota``), and one case per shape class (a rank of at least :data:`LONG_LENGTH` elements, a
zero-length rank, every rank empty, the largest world size allowed).  A stratum that fails
comes with a strategy to shrink the failure in: every case of its dtype, or cases with a
long rank, or any case.  A target whose group parameter is optional is called with the world
group in every other stratum, the first included, and without it in the rest.  With subgroups
(``groups``), strata of several groups, a group rank unlike the global one and an idle rank
come right after the layout strata.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass, replace

from hypothesis import strategies as st

from harness.case import COTANGENT_LAYOUTS, LAYOUTS, Case, RankSpec
from harness.contract import DIFFERENTIABLE_DTYPES, Contract
from harness.coverage import LONG_LENGTH

from ._internal import as_collective, cases, recipes_for, simplest_first

#: Value classes in the order strata visit them: a small budget sees every dtype's full range first.
VALUE_ORDER: tuple[str, ...] = ("random", "normal", "special", "padding", "iota")
#: Lengths of a typical ragged case, rotated per stratum (a zero-length rank has its own stratum).
_RAGGED_LENGTHS = (3, 1, 4, 2, 5)
_TYPICAL_LENGTH = 3


@dataclass(frozen=True)
class Stratum:
    """One stratum: its label, a typical case of it, and the strategy that shrinks a failure in it."""

    label: str
    case: Case
    strategy: st.SearchStrategy[Case]


def strata(*, contract: Contract, dtypes: tuple[str, ...], backend: str, device: str, seed: int) -> list[Stratum]:
    """Every stratum of ``contract`` over ``dtypes``, ordered so any prefix covers every dtype first."""
    rng = random.Random(seed)
    names = simplest_first(dtypes)
    recipes = [values for values in VALUE_ORDER if values in recipes_for(contract)]
    order = [(dtype, values) for values in recipes[:2] for dtype in names]
    order += [(dtype, values) for values in recipes[2:] for dtype in names]
    shapes = _shape_classes(contract, names, rng, backend, device)
    # A failure is shrunk among all cases of its dtype (any value class): toward iota where it can.
    by_dtype = {dtype: cases(contract=contract, dtypes=(dtype,), backend=backend, device=device) for dtype in names}
    dtype_strata = [
        Stratum(f"dtype={dtype} values={values}", _typical(contract, dtype, values, rng, backend, device),
                by_dtype[dtype])
        for dtype, values in order
    ]
    layouts = _layout_classes(contract, names, rng, backend, device)
    first_round = len(names)  # every dtype once, then the shape and layout classes, then the rest
    layers = dtype_strata[:first_round] + shapes + layouts + dtype_strata[first_round:]
    if contract.optional_group:  # both calls from the first two strata on: with the group and without
        layers = [replace(layer, case=_passing_group(layer.case, n % 2 == 0)) for n, layer in enumerate(layers)]
    after_layouts = first_round + len(shapes) + len(layouts)
    layers[after_layouts:after_layouts] = _group_classes(contract, names, rng, backend, device)
    if contract.collective != "gather":
        layers = [replace(layer, case=as_collective(layer.case, contract)) for layer in layers]
    return layers


#: Subgroup layouts every run with ``groups`` reaches early: (lengths, groups); ranks in no group are idle.
_GROUP_CLASSES: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] = (
    ("two groups of one rank", ((0,), (1,))),
    ("a group rank that is not the global rank", ((0, 2), (1,))),
    ("an idle rank beside two groups", ((1, 3), (0,))),
)


def _group_classes(contract: Contract, names: tuple[str, ...], rng: random.Random, backend: str,
                   device: str) -> list[Stratum]:
    """With ``groups`` (not a mesh's): several groups, a group rank unlike the global one, an idle
    rank, at the smallest world that has each: what a subgroup bug needs, which random layouts
    reach late (most draws are one group, and shrinking leans there)."""
    if not contract.groups or contract.mesh:
        return []
    low, high = contract.world_sizes
    # shrunk among cases that pass a group: a failure found on subgroups does not drift to a groupless call
    grouped = cases(contract=replace(contract, optional_group=False), dtypes=names, backend=backend, device=device)
    found = []
    for label, layout in _GROUP_CLASSES:
        world = max(max(group) for group in layout) + 1
        if not low <= world <= high:
            continue
        lengths = tuple(_RAGGED_LENGTHS[r % len(_RAGGED_LENGTHS)] if contract.ragged_cases else _TYPICAL_LENGTH
                        for r in range(world))
        case = replace(_typical(contract, names[0], "random", rng, backend, device, lengths), groups=layout)
        found.append(Stratum(label, case, grouped))
    return found


def _passing_group(case: Case, passes: bool) -> Case:
    """``case`` calling an optional group's target with the group (its layout, else the world
    group) or without it."""
    if not passes:
        return replace(case, groups=(), world_group=False)
    return case if case.groups else replace(case, world_group=True)


def _typical(contract: Contract, dtype: str, values: str, rng: random.Random, backend: str, device: str,
             lengths: tuple[int, ...] | None = None) -> Case:
    """A plain case of ``dtype`` with every rank on the value recipe ``values``: W=3 where the
    contract allows (else its nearest world size), ragged where it allows, 1-d, dim 0."""
    low, high = contract.world_sizes
    if lengths is None:
        world = min(max(3, low), high)
        ragged = contract.ragged_cases
        start = rng.randrange(len(_RAGGED_LENGTHS))
        lengths = tuple(_RAGGED_LENGTHS[(start + r) % len(_RAGGED_LENGTHS)] if ragged else _TYPICAL_LENGTH
                        for r in range(world))
    grad = contract.grad if dtype in DIFFERENTIABLE_DTYPES else "none"
    seed = rng.randrange(2**32)
    values = values if values in recipes_for(contract) else recipes_for(contract)[-1]
    ranks = tuple(RankSpec((n,), values=values, seed=seed) for n in lengths)
    groups = (tuple(range(len(lengths))),) if contract.groups else ()
    return Case(ranks=ranks, dtype=dtype, grad=grad, backend=backend, device=device, groups=groups,
                output=contract.read_as.name)


def _layout_classes(contract: Contract, names: tuple[str, ...], rng: random.Random, backend: str,
                    device: str) -> list[Stratum]:
    """Every input layout × cotangent layout on 2-d inputs, each with every rank alike, then
    ranks holding different ones (two rotations): a bug confined to, say, a transposed cotangent
    (``torch.distributed.nn``'s backward on gloo) or to ranks whose layouts differ is then found
    in every run, not by luck.  Without gradients only the input layouts count."""
    grad = contract.grad != "none"
    dtype = next((d for d in names if d in DIFFERENTIABLE_DTYPES), names[0]) if grad else names[0]
    cotangents = COTANGENT_LAYOUTS if grad and dtype in DIFFERENTIABLE_DTYPES else COTANGENT_LAYOUTS[:1]
    pairs = [pair for pair in itertools.product(LAYOUTS, cotangents) if pair != (LAYOUTS[0], COTANGENT_LAYOUTS[0])]
    low, high = contract.world_sizes
    world = min(max(2, low), high)
    uniform = [(f"every rank: input {layout}, cotangent {cotangent}" if grad else f"every rank: input {layout}",
                [(layout, cotangent)] * world) for layout, cotangent in pairs]
    mixed_world = min(max(3, low), high)
    mixed = [(f"ranks with different layouts ({turn + 1} of 2)",
              [(LAYOUTS[(r + turn) % len(LAYOUTS)], cotangents[(r + 2 * turn) % len(cotangents)])
               for r in range(mixed_world)]) for turn in range(2)] if mixed_world > 1 else []
    strategy = cases(contract=contract, dtypes=(dtype,), backend=backend, device=device, min_ndim=2)
    return [Stratum(label, _two_dimensional(contract, dtype, layouts, rng, backend, device), strategy)
            for label, layouts in uniform + mixed]


def _two_dimensional(contract: Contract, dtype: str, layouts: list[tuple[str, str]], rng: random.Random,
                     backend: str, device: str) -> Case:
    """A typical 2-d case whose rank r holds ``layouts[r]`` (input layout, cotangent layout):
    ragged along the gather dim where the contract allows, the last dim where it gathers any."""
    case = _typical(contract, dtype, "random", rng, backend, device, lengths=(_TYPICAL_LENGTH,) * len(layouts))
    ragged = contract.ragged_cases
    start = rng.randrange(len(_RAGGED_LENGTHS))
    dim = 0 if contract.dims == "0" else -1
    ranks = []
    for r, (spec, (layout, cotangent)) in enumerate(zip(case.ranks, layouts)):
        n = _RAGGED_LENGTHS[(start + r) % len(_RAGGED_LENGTHS)] if ragged else _TYPICAL_LENGTH
        shape = (n, 2) if dim == 0 else (2, n)
        ranks.append(dataclasses.replace(spec, shape=shape, layout=layout, cotangent_layout=cotangent))
    return dataclasses.replace(case, ranks=tuple(ranks), dim=dim)


def _shape_classes(contract: Contract, names: tuple[str, ...], rng: random.Random, backend: str,
                   device: str) -> list[Stratum]:
    """A long rank, a zero-length rank, every rank empty, and the largest world allowed; each of
    the first of ``names`` (the dtypes drawn), shrunk among cases of any of them, never of a
    dtype the backend cannot move (its refusal would be shrunk into a finding against the target)."""
    low, high = contract.world_sizes
    ragged = contract.ragged_cases
    anything = cases(contract=contract, dtypes=names, backend=backend, device=device)
    wanted: list[tuple[str, tuple[int, ...], st.SearchStrategy[Case]]] = []
    two = min(max(2, low), high)
    long = LONG_LENGTH + rng.randrange(32)
    wanted.append((f"a rank of {LONG_LENGTH} or more", (long,) + ((1,) if ragged else (long,)) * (two - 1),
                   cases(contract=contract, dtypes=names, backend=backend, device=device, long_rank=True)))
    three = min(max(3, low), high)
    if ragged and three > 1:
        wanted.append(("a zero-length rank", tuple((2, 0, 1)[r % 3] for r in range(three)), anything))
    wanted.append(("every rank empty", (0,) * two, anything))
    if high > three:
        lengths = tuple(_RAGGED_LENGTHS[r % len(_RAGGED_LENGTHS)] if ragged else 1 for r in range(high))
        wanted.append((f"the largest world, W={high}", lengths, anything))
    return [Stratum(label, _typical(contract, names[0], "random", rng, backend, device, lengths), strategy)
            for label, lengths, strategy in wanted]
