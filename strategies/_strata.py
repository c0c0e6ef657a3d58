"""Strata: a pairwise schedule over the axes that choose a gather's code path, run first.

Hypothesis's draws do not spread evenly, and a gather's bugs hide on paths: the fast path
taken when every rank holds the same non-empty shape, a zero-size dim besides the gather dim,
a 3-d activation with a batch, a rank in no group.  Drawn independently, such a case is one
draw in ten or twelve, met late or not at all.  So every run starts with a covering array:
rows over :data:`harness.strategies.space.PAIR_AXES` (world size, dtype, ndim, the kind of gather dim,
raggedness, a zero-size dim, a long rank, an activation shape, input layout, value class,
group layout, cotangent layout) such that every pair of values that can hold together
(:func:`harness.strategies.space.allowed`) holds in some row.  Rows are chosen greedily (AETG: each
row the best of a few candidates, built value by value to cover the most pairs not yet
covered), deterministically from the run's seed, so a prefix covers the most pairs.

Each row is built into one typical case, and comes with a strategy to find a failure again
and shrink it in when a search among every case did not meet it: cases of its dtype held to
its path (:class:`~harness.strategies.Like`: its raggedness, zero-size dim and group layout,
derived from the world size so shrinking drops ranks without leaving the path), so a failure
that needs the equal-length path is met again at once, and one that does not shrinks off it.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from harness.strategies._internal import as_collective, cases, simplest_first
from harness.strategies._shapes import Like, group_layout
from harness.strategies.space import (
    HIDDEN,
    LONG_LENGTH,
    MIXED,
    PAIR_AXES,
    TRIPLE_AXES,
    Space,
    allowed,
    completable,
    completion,
    interactions,
    needs_value,
    pair_label,
    possible_pairs,
)
from hypothesis import strategies as st

from harness.core.case import COTANGENT_LAYOUTS, COTANGENT_RECIPES, LAYOUTS, Case, RankSpec
from harness.core.contract import DIFFERENTIABLE_DTYPES, Contract

#: Candidate rows tried for each row kept: more cover more pairs per row, at a cost in time.
CANDIDATES = 6
#: Lengths of a typical ragged case, rotated per rank (never all equal, never 0).
_RAGGED_LENGTHS = (3, 1, 4, 2, 5)
#: Hidden sizes of an activation, halved while the case would exceed :data:`_MAX_ELEMENTS`.
_HIDDEN_SIZES = (32, 64, 128, 256)
_MAX_ELEMENTS = 4096
#: Values a label leaves out: what most rows hold.
_PLAIN = {"zero-size dim": "no", "long rank": "no", "activation": "no", "layout": "contiguous",
          "cotangent layout": "contiguous"}


@dataclass(frozen=True)
class Stratum:
    """One stratum: its label, a typical case of it, the strategy that shrinks a failure in it,
    and the row of the schedule it was built from (axis -> value)."""

    label: str
    case: Case
    strategy: st.SearchStrategy[Case]
    path: dict[str, str] = field(default_factory=dict)


def strata(*, contract: Contract, dtypes: tuple[str, ...], backend: str, device: str, seed: int,
           count: int | None = None) -> list[Stratum]:
    """A case per row of the pairwise schedule of ``contract`` over ``dtypes``, most new pairs first;
    ``count``: only the first so many (the rest of the schedule is not computed)."""
    names = simplest_first(dtypes)
    domain = Space.for_contract(contract, names).domain()
    rng = random.Random(seed)
    layers = []
    for n, row in enumerate(covering_rows(tuple(domain.items()), seed, count)):
        case = _built(contract, row, rng, backend, device, passes_group=n % 2 == 0)
        layers.append(Stratum(_label(row), case, _like(contract, row, backend, device), row))
    return layers


def random_strata(*, contract: Contract, dtypes: tuple[str, ...], backend: str, device: str,
                  seed: int) -> Iterator[Stratum]:
    """Strata without end for the fuzz engine's batches: a row of the schedule at random, built each
    time with fresh randomness (lengths, sizes, dims, layouts dealt, value seeds).  Microseconds a
    case, where a Hypothesis draw costs milliseconds: what keeps warm ranks busy.  A failure
    among them is searched again and shrunk through its row's strategy, as a stratum's is."""
    names = simplest_first(dtypes)
    rows = covering_rows(tuple(Space.for_contract(contract, names).domain().items()), seed)
    rng = random.Random(seed)
    likes: dict[int, st.SearchStrategy[Case]] = {}
    while True:
        n = rng.randrange(len(rows))
        row = rows[n]
        case = _built(contract, row, rng, backend, device, passes_group=rng.random() < 0.5)
        if n not in likes:
            likes[n] = _like(contract, row, backend, device)
        yield Stratum(_label(row), case, likes[n], row)


def covering_rows(domain_items: tuple[tuple[str, tuple[str, ...]], ...], seed: int,
                  count: int | None = None) -> tuple[dict[str, str], ...]:
    """Rows over ``domain`` covering every possible pair of values (:meth:`Space.possible_pairs`);
    ``count``: the first so many of them only.

    The first row holds the simplest value of every axis; each next one is the best of
    :data:`CANDIDATES` built greedily from an uncovered pair.  Cached: every check of a run
    with the same space and seed (a catalogue's) shares the schedule, computed as far as asked
    (a search of 60 examples runs 48 strata of the 35-68 rows a contract has).
    """
    return _schedule(domain_items, seed).first(count)


@functools.cache
def _schedule(domain_items: tuple[tuple[str, tuple[str, ...]], ...], seed: int) -> _Schedule:
    return _Schedule(dict(domain_items), seed)


class _Schedule:
    """The covering rows of one domain and seed, each computed when first asked for: the rows
    are chosen one after another from one random generator, so a prefix is the same however
    far the schedule was computed before."""

    def __init__(self, domain: dict[str, tuple[str, ...]], seed: int) -> None:
        self.domain = domain
        self.uncovered = set(possible_pairs(domain))
        self.labels = _Labels(domain)
        self.rng = random.Random(seed)
        self.rows: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def first(self, count: int | None) -> tuple[dict[str, str], ...]:
        with self.lock:
            while self.uncovered and (count is None or len(self.rows) < count) and self._extend():
                pass
            return tuple(self.rows[:count])

    def _extend(self) -> bool:
        """Add the next row; ``False`` (and the schedule is complete) when no candidate covers more."""
        domain, uncovered, rng = self.domain, self.uncovered, self.rng
        ordered = sorted(uncovered)
        candidates = [_candidate(domain, uncovered, ordered[rng.randrange(len(ordered))], rng, self.labels)
                      for _ in range(CANDIDATES)] if self.rows else [_simplest(domain)]
        best = max(candidates, key=lambda row: len(_covered(row) & uncovered))
        if not _covered(best) & uncovered:
            uncovered.clear()
            return False
        self.rows.append(best)
        uncovered -= _covered(best)
        return True


class _Labels:
    """The label (:func:`~harness.strategies.space.pair_label`) of every pair of values of a domain,
    looked up rather than formatted: the schedule asks what each value would add to each
    candidate row, hundreds of thousands of times per contract."""

    def __init__(self, domain: dict[str, tuple[str, ...]]) -> None:
        place = {axis: n for n, axis in enumerate(PAIR_AXES)}
        self.pairs = {(a, x, b, y): pair_label(*sorted(((a, x), (b, y)), key=lambda held: place[held[0]]))
                      for a, b in itertools.permutations(domain, 2) for x in domain[a] for y in domain[b]}

    def added(self, row: dict[str, str], axis: str, value: str, uncovered: set[str]) -> int:
        """How many uncovered pairs (and :data:`~harness.strategies.space.TRIPLE_AXES` triples) giving
        ``axis`` the value ``value`` adds to ``row``: ``_covered({**row, axis: value}, involving=axis)``
        counted, without naming every pair."""
        added = sum(self.pairs[held, x, axis, value] in uncovered for held, x in row.items())
        if axis in TRIPLE_AXES and all(other in row for other in TRIPLE_AXES if other != axis):
            added += pair_label(*((a, value if a == axis else row[a]) for a in TRIPLE_AXES)) in uncovered
        return added


def _simplest(domain: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """The first value of every axis that can take one: W=1 (or the least), the simplest dtype, 1-d ..."""
    row: dict[str, str] = {}
    for axis, values in domain.items():
        value = next((v for v in values if completable({**row, axis: v}, domain)), None)
        if value is not None:
            row[axis] = value
    return row


def _candidate(domain: dict[str, tuple[str, ...]], uncovered: set[str], start: str,
               rng: random.Random, labels: _Labels) -> dict[str, str]:
    """A row holding the pair ``start``, its other axes in random order, each given the value
    that covers the most uncovered pairs with the values already chosen (ties at random)."""
    row = dict(part.split("=", 1) for part in start.split(" x "))
    witness = completion(row, domain) or row  # a possible pair: never None
    rest = [axis for axis in domain if axis not in row]
    rng.shuffle(rest)
    for axis in rest:
        # the most new pairs; among equals the simplest value, so rows hold only what they cover.
        # Ranked first and asked whether the row can still be completed only in that order: the
        # question costs a search over the axes left, and is most of the schedule's time
        ranked = sorted(((labels.added(row, axis, v, uncovered), -n, v)
                         for n, v in enumerate(domain[axis]) if allowed({**row, axis: v})), reverse=True)
        for _, _, value in ranked:
            # the row so far completed as before, this value in: most often still allowed, and
            # then there is no need to search the axes left for a completion
            moved = {**witness, axis: value}
            found = moved if allowed(moved) and _whole(moved, domain) else completion({**row, axis: value}, domain)
            if found is not None:
                row[axis], witness = value, found
                break
        # no value: the cotangent axis of a dtype without gradients
    return {axis: row[axis] for axis in domain if axis in row}


def _whole(row: dict[str, str], domain: dict[str, tuple[str, ...]]) -> bool:
    """Every axis of ``domain`` has a value in ``row`` (but the cotangent's, for a dtype without gradients)."""
    return all(axis in row or not needs_value(axis, row) for axis in domain)


def _covered(row: dict[str, str]) -> set[str]:
    return interactions({axis: (value,) for axis, value in row.items()})


def _label(row: dict[str, str]) -> str:
    """``W=3 int8 ndim=2 dim kind=positive ragged layout=transposed ...``: the row, plain values left out."""
    shown = [f"W={row['W']}", row["dtype"], f"ndim={row['ndim']}"]
    shown += [f"{axis}={value}" for axis, value in row.items()
              if axis not in ("W", "dtype", "ndim") and _PLAIN.get(axis) != value]
    return " ".join(shown)


# ---------------------------------------------------------------------------------------------
# a row as a case


def _built(contract: Contract, row: dict[str, str], rng: random.Random, backend: str, device: str, *,
           passes_group: bool) -> Case:
    """The typical case of ``row`` (see the module docstring); ``passes_group``: a target whose
    group is optional and who is not drawn layouts gets the world group, else no group."""
    world, ndim, dtype = int(row["W"]), int(row["ndim"]), row["dtype"]
    groups, world_group = _groups(contract, row, world, passes_group)
    active = sorted(r for group in groups for r in group) if groups else list(range(world))
    lengths = _lengths(row, world, active, rng)
    others = _other_dims(row, ndim, sum(lengths), rng)
    kind = row.get("dim kind", "0")
    dim = 0 if kind == "0" or ndim == 1 and kind == "positive" else (
        rng.randrange(1, ndim) if kind == "positive" else -rng.randrange(1, ndim + 1))
    if contract.drawn_dims.lstrip("-").isdigit():  # one dim, the contract's (a re-layout's gather dim)
        dim = int(contract.drawn_dims)
    grad = contract.grad if dtype in DIFFERENTIABLE_DTYPES else "none"
    seed = rng.randrange(2**32)
    layouts = _per_rank(row.get("layout", "contiguous"), LAYOUTS, world, ndim, rng, active)
    cotangents = _per_rank(row.get("cotangent layout", "contiguous"), COTANGENT_LAYOUTS, world, ndim, rng, active)
    cotangent = COTANGENT_RECIPES[rng.randrange(len(COTANGENT_RECIPES))] if grad != "none" else "ints"
    d = dim % ndim
    ranks = tuple(RankSpec(tuple(others[:d]) + (n,) + tuple(others[d:]), layout=layouts[r], values=row["values"],
                           seed=seed, cotangent=cotangent, cotangent_layout=cotangents[r] if grad != "none" else
                           "contiguous") for r, n in enumerate(lengths))
    case = Case(ranks=ranks, dim=dim, dtype=dtype, grad=grad, backend=backend, device=device, groups=groups,
                output=contract.read_as.name, world_group=world_group)
    if contract.collective == "gather":
        return case
    return as_collective(case, contract if row["raggedness"] != "equal" else contract.with_(ragged=False))


def _groups(contract: Contract, row: dict[str, str], world: int,
            passes_group: bool) -> tuple[tuple[tuple[int, ...], ...], bool]:
    """``(groups, world_group)`` of a row: its layout with ``groups``, the mesh's one group, else
    the world group or none (alternating, for a target whose group is optional)."""
    if contract.groups:
        kind = row.get("groups", "one group")
        return group_layout(kind, world), False
    return (), contract.optional_group and passes_group


def _lengths(row: dict[str, str], world: int, active: list[int], rng: random.Random) -> list[int]:
    """Per-rank lengths along the gather dim holding the row's raggedness on its active ranks
    (idle ranks hold 2); a long rank is the first active one (every one, if equal)."""
    pattern, long = row["raggedness"], row.get("long rank") == "yes"
    long_length = LONG_LENGTH + rng.randrange(32)
    start = rng.randrange(len(_RAGGED_LENGTHS))
    equal = long_length if long else rng.randint(1, 4)
    lengths = [2] * world
    for k, r in enumerate(active):
        if pattern == "all empty":
            lengths[r] = 0
        elif pattern == "equal":
            lengths[r] = equal
        else:
            lengths[r] = long_length if long and k == 0 else _RAGGED_LENGTHS[(start + k) % len(_RAGGED_LENGTHS)]
    if pattern == "zero-length rank":
        lengths[active[-1]] = 0
    return lengths


def _other_dims(row: dict[str, str], ndim: int, total: int, rng: random.Random) -> list[int]:
    """The sizes of the dims besides the gather dim: 1..3 (one of them 0 for a zero-size dim);
    an activation's batch (and heads) 2..4 and a hidden size of tens to hundreds, halved to
    keep the case within :data:`_MAX_ELEMENTS`."""
    others = [rng.randint(1, 3) for _ in range(ndim - 1)]
    if row.get("activation") == "yes":
        others = [rng.randint(2, 4) for _ in range(ndim - 2)] + [_HIDDEN_SIZES[rng.randrange(len(_HIDDEN_SIZES))]]
        while others[-1] > HIDDEN and max(total, 1) * math.prod(others) > _MAX_ELEMENTS:
            others[-1] //= 2
    if row.get("zero-size dim") == "yes":
        others[rng.randrange(len(others))] = 0
    return others


def _per_rank(value: str, layouts: tuple[str, ...], world: int, ndim: int, rng: random.Random,
              active: list[int]) -> list[str]:
    """Every rank's layout: ``value``, or for ``mixed`` the layouts in their order (no transposed
    1-d view), contiguous and transposed first, dealt to the ``active`` ranks from a random one on:
    the two storage orders furthest apart always sit side by side, on ranks the case uses.  (Dealt from a random layout, a W=2
    case held contiguous beside transposed once in four, and the catalogue's reduce-scatter whose
    sum depends on the ranks' storage orders passed every run.)"""
    if value != MIXED:
        return [value] * world
    usable = [layout for layout in layouts if ndim > 1 or layout != "transposed"]
    shift = rng.randrange(len(active))
    dealt = ["contiguous"] * world  # an idle rank's (it holds no part of the case)
    for k, r in enumerate(active):
        dealt[r] = usable[(k - shift) % len(active) % len(usable)]
    return dealt


def _like(contract: Contract, row: dict[str, str], backend: str, device: str) -> st.SearchStrategy[Case]:
    """Where a failing row is searched again and shrunk when a search among every case did not
    meet it (:meth:`harness.search.session._Session.strata`): cases on its path (:class:`Like`) of its
    dtype, with its long rank, its activation's 3 dims or the 2 its layouts or dim need."""
    like = Like(raggedness=row["raggedness"] if row["raggedness"] != "one rank" else None,
                zero_size_dim=row.get("zero-size dim") == "yes",
                groups=row.get("groups") if contract.groups and not contract.mesh else None)
    long = row.get("long rank") == "yes"
    two_d = (row.get("dim kind") == "positive" or "transposed" in (row.get("layout"), row.get("cotangent layout"))
             or MIXED in (row.get("layout"), row.get("cotangent layout")) and int(row["ndim"]) > 1)
    min_ndim = 1 if long else 3 if row.get("activation") == "yes" else 2 if two_d else 1
    return cases(contract=contract, dtypes=(row["dtype"],), backend=backend, device=device, long_rank=long,
                 min_ndim=min_ndim, like=like)


__all__ = ["Stratum", "covering_rows", "random_strata", "strata"]
