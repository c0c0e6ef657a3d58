"""Every all_gather path torch itself ships, each called the way users call it.

``f(x, dim)`` or ``f(x, gather_dim)`` plus ``group=None`` (the world), returning what torch
returns; glue only where torch's API cannot be called so, and each docstring says why.  Every
function uses the group it is given, so subgroup layouts work.  The claims are the catalogue's
(:mod:`harness.variants`, the table in ``docs/report.md``); what each path really does on gloo is
measured by the scripts and tables of ``docs/findings/``.  ``chunk*`` in a claim: ranks may hold
different lengths only in ``torch.chunk``'s layout (:func:`chunk_lengths`).
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.nn.functional as dist_nn
import torch.distributed.tensor as dtensor
from torch.distributed.device_mesh import DeviceMesh

from harness.core.procedure import made_group, make_groups

# Only modules every supported torch has are imported here; their names are looked up when a path
# runs, so a torch that lacks one (DTensor's public names arrived in 2.5, ``all_gather_single`` later)
# breaks only the paths that call it, and the catalogue marks those unavailable without running them
# (``harness.variants.specs.Need``).

__all__ = [
    "all_gather_into_tensor_stack",
    "all_gather_object_list",
    "all_gather_single_stack",
    "chunk_lengths",
    "dtensor_full_tensor",
    "dtensor_full_tensor_sum_grad",
    "dtensor_full_tensor_uneven",
    "dtensor_mesh2d",
    "dtensor_redistribute",
    "dtensor_redistribute_uneven",
    "funcol_all_gather_into_tensor_coalesced",
    "funcol_all_gather_mesh",
    "funcol_all_gather_single",
    "funcol_all_gather_single_autograd",
    "funcol_all_gather_single_coalesced",
    "funcol_all_gather_tensor",
    "funcol_all_gather_tensor_autograd",
    "funcol_mesh2d",
    "gather_object_to_group_rank0",
    "mesh2d_layout",
    "nn_all_gather",
]


def _pg(group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    """The group to use: the one given, else the world (the default group)."""
    if group is not None:
        return group
    world = dist.group.WORLD
    if world is None:
        raise RuntimeError("the default process group is not initialized")
    return world


def chunk_lengths(total: int, world: int) -> list[int]:
    """Per-rank lengths of ``Shard(d)`` for a dimension of length ``total`` on ``world`` ranks.

    ``torch.chunk`` semantics (the ``Shard`` docstring): every rank holds ``ceil(total/world)``
    except that the last non-empty shard may be shorter and the ranks after it hold nothing,
    e.g. ``chunk_lengths(4, 3) == [2, 2, 0]`` (not ``[2, 1, 1]``), ``chunk_lengths(5, 4) ==
    [2, 2, 1, 0]``.  These are the only uneven layouts the ``*_uneven`` DTensor paths claim.
    """
    size = -(-total // world) if world else 0
    return [max(0, min(size, total - rank * size)) for rank in range(world)]


# -- DTensor: Shard(d) -> Replicate() over a 1-D mesh on the group ---------------------------------


def _mesh(x: torch.Tensor, group: dist.ProcessGroup | None) -> DeviceMesh:
    """A 1-D mesh over ``group`` (``DeviceMesh.from_group``: no collective, no new group)."""
    return DeviceMesh.from_group(_pg(group), x.device.type)


def _from_local(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None, *, uneven: bool) -> dtensor.DTensor:
    """``DTensor.from_local(x, mesh, [Shard(dim)], run_check=False[, shape=, stride=])``.

    ``uneven``: pass the global ``shape``/``stride`` (from_local's docstring: "this needs to
    be provided if the shape of local_tensor are different across the ranks").  Each rank
    knows only its own length, so the global length along ``dim`` is summed with one
    ``all_reduce`` over the group: that is glue, the only way to call the uneven form as
    ``f(x, dim)``; users of DTensor know the global shape from their model.
    """
    mesh = _mesh(x, group)
    if not uneven:
        return dtensor.DTensor.from_local(x, mesh, [dtensor.Shard(dim)], run_check=False)
    d = dim % x.ndim
    total = torch.tensor([x.shape[d]], dtype=torch.int64, device=x.device)
    dist.all_reduce(total, group=_pg(group))
    shape = torch.Size((*x.shape[:d], int(total.item()), *x.shape[d + 1:]))
    stride = torch.empty(shape, device="meta").stride()
    return dtensor.DTensor.from_local(x, mesh, [dtensor.Shard(dim)], run_check=False, shape=shape, stride=stride)


def dtensor_redistribute(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``DTensor.from_local(x, mesh, [Shard(dim)]).redistribute(mesh, [Replicate()]).to_local()``.

    Contract (torch 2.13 docstrings, ``torch/distributed/tensor/_api.py``;
    https://pytorch.org/docs/stable/distributed.tensor.html):

    - ``redistribute``: "``Shard(dim)`` -> ``Replicate()``: ``all_gather``"; it "is
      twice-differentiable".  Any tensor dim, negative ones included (normalized).
    - ``from_local`` without ``shape``/``stride`` computes the global shape "assuming the given
      distributed tensor is evenly sharded across ranks": equal shapes only (use
      :func:`dtensor_redistribute_uneven` for uneven shards).
    - Gradient: ``to_local``'s gradient layout is assumed to be the DTensor's (``Replicate``),
      and ``Replicate -> Shard`` in the backward is "local chunking": rank r's gradient is
      its own slot of its own cotangent, the **local** contract.  (Correct when the cotangent
      really is replicated, as DTensor assumes; with per-rank cotangents it is ``local``.)
    - With one rank the redistribute is skipped and the result is a view of ``x``.
    """
    mesh = _mesh(x, group)
    return _from_local(x, dim, group, uneven=False).redistribute(mesh, [dtensor.Replicate()]).to_local()


def dtensor_full_tensor(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``DTensor.from_local(x, mesh, [Shard(dim)]).full_tensor()``.

    ``full_tensor`` is documented as "syntactic sugar" for
    ``redistribute(placements=[Replicate()] * mesh.ndim).to_local()`` and "is differentiable";
    its ``grad_placements`` default "assume[s] the gradient layout of the full tensor be
    replicated": same contract as :func:`dtensor_redistribute` (equal shapes, any dim,
    **local** gradient).
    """
    return _from_local(x, dim, group, uneven=False).full_tensor()


def dtensor_redistribute_uneven(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """:func:`dtensor_redistribute` with the global ``shape``/``stride`` passed to ``from_local``.

    Uneven shards: ``Shard`` "follows the ``torch.chunk(dim)`` semantic, where the last few
    shards ... might be empty" (``placement_types.Shard``), and the gather pads every shard to
    ``ceil(L/W)``, all-gathers, and drops the padding at the end.  So the lengths must be
    exactly :func:`chunk_lengths` of the total; other layouts are undefined per
    ``from_local``'s note ("it is the user's responsibility ... the tensor is sharded for the
    ``Shard(dim)`` placement") and really do give wrong values, wrong gradients, errors or a
    gloo abort, even with ``run_check=True`` (pytorch#144109; ``docs/findings``).
    Gradient: **local**.  Glue: one ``all_reduce`` of the length (see ``_from_local``).
    """
    mesh = _mesh(x, group)
    return _from_local(x, dim, group, uneven=True).redistribute(mesh, [dtensor.Replicate()]).to_local()


def dtensor_full_tensor_uneven(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """:func:`dtensor_full_tensor` for ``torch.chunk``-layout uneven shards (see
    :func:`dtensor_redistribute_uneven`); **local** gradient."""
    return _from_local(x, dim, group, uneven=True).full_tensor()


def dtensor_full_tensor_sum_grad(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``full_tensor(grad_placements=[Partial()])``: the gradient is declared partial (a sum).

    ``full_tensor``'s ``grad_placements`` is "the hint that user can give to autograd in case
    the gradient layout of the returned tensor does not match the original replicated DTensor
    layout"; with ``Partial()`` the backward ``Partial -> Shard`` is a reduce-scatter: the
    **sum** contract.  Shards: ``torch.chunk`` layout (:func:`chunk_lengths`), equal included.
    """
    return _from_local(x, dim, group, uneven=True).full_tensor(grad_placements=[dtensor.Partial()])


# -- functional collectives ---------------------------------------------------------------------------


def funcol_all_gather_single(x: torch.Tensor, gather_dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``torch.distributed._functional_collectives.all_gather_single(x, gather_dim, group)``.

    Docstring: "Gather tensor data across from all machines and concatenate over
    ``gather_dim``.  Note that it currently only supports gather_dim = 0.  The input tensor is
    left unmodified."  The code does handle other dims (``_maybe_view_chunk_cat``) and works
    for every dim in practice; all ranks must hold equal shapes (a ragged call aborts a gloo
    rank).  Returns an ``AsyncCollectiveTensor`` (waits on first use) or, for other dims, a
    plain tensor.  Autograd is registered on the op in torch 2.13 ("The base
    all_gather_single now has autograd support"): the backward is a ``reduce_scatter_tensor``
    with sum, the **sum** contract.  Glue: ``group`` is a required argument in torch; ``None``
    here means the world.  Known flaw: complex inputs with ``requires_grad`` intermittently
    raise "... is a view and its base ... has been modified inplace" (``docs/findings``).
    """
    return funcol.all_gather_single(x, gather_dim, _pg(group))


def funcol_all_gather_single_autograd(
    x: torch.Tensor, gather_dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``_functional_collectives.all_gather_single_autograd(x, gather_dim, group)``.

    "This function is the same as all_gather_single but will propagate the backwards gradient
    across workers" (and in torch 2.13 simply calls it): same contract, **sum** gradient.
    """
    return funcol.all_gather_single_autograd(x, gather_dim, _pg(group))


def funcol_all_gather_tensor(x: torch.Tensor, gather_dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``_functional_collectives.all_gather_tensor(x, gather_dim, group)``: deprecated in torch
    2.13 for ``all_gather_single`` (a ``FutureWarning``, silenced here), which it calls."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return funcol.all_gather_tensor(x, gather_dim, _pg(group))


def funcol_all_gather_tensor_autograd(
    x: torch.Tensor, gather_dim: int, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``_functional_collectives.all_gather_tensor_autograd(x, gather_dim, group)``: deprecated
    alias of ``all_gather_single_autograd`` (warning silenced); **sum** gradient."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return funcol.all_gather_tensor_autograd(x, gather_dim, _pg(group))


def funcol_all_gather_single_coalesced(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> list[torch.Tensor]:
    """``_functional_collectives.all_gather_single_coalesced([x], group)``: output ``first``.

    "Gather a list of tensors across from all machines.  Note that it currently only supports
    gather_dim = 0."  It takes a list of tensors and returns one gathered tensor per input
    (dim 0); glue: ``[x]`` in, the list out as torch returns it (its first element is the
    concatenation).  Equal shapes.  Autograd: reduce-scatter (**sum**).  On gloo complex
    dtypes raise "Invalid scalar type" (no ``view_as_real``, unlike ``all_gather_single``).
    """
    return funcol.all_gather_single_coalesced([x], _pg(group))


def funcol_all_gather_into_tensor_coalesced(
    x: torch.Tensor, group: dist.ProcessGroup | None = None
) -> list[torch.Tensor]:
    """``_functional_collectives.all_gather_into_tensor_coalesced([x], group)``: deprecated
    alias of :func:`funcol_all_gather_single_coalesced` (warning silenced); output ``first``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return funcol.all_gather_into_tensor_coalesced([x], _pg(group))


def funcol_all_gather_mesh(x: torch.Tensor, gather_dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``all_gather_single(x, gather_dim, (mesh, 0))`` with ``mesh = DeviceMesh.from_group(group)``.

    The ``(DeviceMesh, int)`` group form: "Do a MPMD collective over one dimension of the
    DeviceMesh".  Same contract as :func:`funcol_all_gather_single` (**sum** gradient).
    """
    return funcol.all_gather_single(x, gather_dim, (_mesh(x, group), 0))


# -- c10d ---------------------------------------------------------------------------------------------


def all_gather_into_tensor_stack(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``dist.all_gather_into_tensor(out, x, group)`` into a stacked ``(W, *x.shape)`` buffer.

    Docstring (``dist.all_gather_single``, which it calls in torch 2.13): the output "must be
    correctly sized to have one of the following forms: (i) a concatenation ... (ii) a stack
    of all the input tensors along the primary dimension"; "requires all tensors to be the
    same size on each process".  Output ``stack`` (the gather dim is irrelevant: the stack
    has a new leading dim).  No autograd.  Glue: the API writes into a buffer the caller
    allocates.  On gloo in torch 2.13 the stack form raises "invalid tensor size" on every
    rank (pytorch#178798; ``docs/findings``).
    """
    pg = _pg(group)
    out = x.new_empty((dist.get_world_size(pg), *x.shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_gather_into_tensor(out, x, group=pg)
    return out


def all_gather_single_stack(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``dist.all_gather_single(out, x, group)`` into a stacked ``(W, *x.shape)`` buffer: torch
    2.13's name for :func:`all_gather_into_tensor_stack` (same contract, same gloo failure)."""
    pg = _pg(group)
    out = x.new_empty((dist.get_world_size(pg), *x.shape))
    dist.all_gather_single(out, x, group=pg)
    return out


def gather_object_list(x: torch.Tensor, dst: int = 0, group: dist.ProcessGroup | None = None) -> list[torch.Tensor] | None:
    """``dist.gather_object(x, out, dst, group)``: output ``list`` on the destination (a global rank,
    c10d's convention), ``None`` on the others (not judged: ``--collective gather-to``).

    Docstring: "Gathers picklable objects from the whole group in a single process. Similar to
    gather(), but Python objects can be passed in."  Tensors are pickled whole, so shapes, dims
    and dtypes are free.  No gradient.  Glue: the API fills a list the destination allocates.
    """
    pg = _pg(group)
    out: list[torch.Tensor | None] | None = [None] * dist.get_world_size(pg) if dist.get_rank() == dst else None
    dist.gather_object(x, out, dst=dst, group=pg)
    return None if out is None else [t for t in out if t is not None]


def all_gather_object_list(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> list[torch.Tensor]:
    """``dist.all_gather_object(out, x, group)``: output ``list`` (one tensor per group rank).

    Docstring: "Gathers picklable objects from the whole group into a list ... Similar to
    all_gather(), but Python objects can be passed in."  Objects may differ, so shapes,
    dims and dtypes are free (ragged, any dim); tensors are pickled with their strides and
    whole storage, so values and bits arrive intact.  No gradient: the received tensors are
    new leaves (``requires_grad`` copied from the sender), ``x`` gets none.  Glue: the API
    fills a list the caller allocates.
    """
    pg = _pg(group)
    out: list[torch.Tensor | None] = [None] * dist.get_world_size(pg)
    dist.all_gather_object(out, x, group=pg)
    return [t for t in out if t is not None]


def gather_object_to_group_rank0(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> list[torch.Tensor] | None:
    """``dist.gather_object(x, out, group=group, group_dst=0)``: a gather to ONE rank.

    Docstring: "Gathers picklable objects from the whole group in a single process"; the
    list is filled on the destination only ("Non-destination ranks ... should pass None").
    Group rank 0 returns the ``list``; every other rank returns ``None``: this does **not**
    fit the harness's "every rank gets the result" contract; register it only with a
    destination-only reading (check the list on group rank 0, ``None`` elsewhere).  Glue:
    the destination allocates the list.
    """
    pg = _pg(group)
    mine = dist.get_rank(pg) == 0
    out: list[torch.Tensor | None] | None = [None] * dist.get_world_size(pg) if mine else None
    dist.gather_object(x, out, group=pg, group_dst=0)
    return None if out is None else [t for t in out if t is not None]


def nn_all_gather(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> tuple[torch.Tensor, ...]:
    """``torch.distributed.nn.functional.all_gather(x, group)``: output ``list`` (a tuple).

    Docstring: "Gathers tensors from the whole group in a list.  Arguments: tensor (Tensor):
    Tensor to be broadcast from current process ... Returns: tuple([Tensor]): Output of the
    collective."  Equal shapes; differentiable, backward = reduce-scatter of the cotangents
    (**sum**; on gloo emulated by ``_AlltoAll`` of ``scatter`` calls plus a sum).  Deprecated in
    torch 2.13 for ``all_gather_single`` (a ``FutureWarning``, silenced here).  On gloo a cotangent
    in a permuted layout comes back with its strides ignored, and in a subgroup whose members are
    not global ranks ``0..n-1`` the backward raises "Global rank 0 is not part of group"
    (``docs/findings``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return dist_nn.all_gather(x, group=_pg(group))


# -- 2-D DeviceMesh: gather along one mesh dimension ---------------------------------------------------

#: (world group name, mesh rows, the given group's name) -> the 2-D mesh built around it, once.
_MESHES: dict[tuple[str, tuple[tuple[int, ...], ...], str], DeviceMesh] = {}


def mesh2d_layout(ranks: list[int], world: int) -> tuple[list[list[int]], int]:
    """The 2-D mesh over ``world`` ranks in which ``ranks`` is one mesh-dimension group.

    Returns ``(mesh, mesh_dim)``: ``mesh`` as nested lists of global ranks, row-major
    ``arange(world)``, and the mesh dim along which ``ranks`` is a group:

    - a contiguous block ``[k*n, ..., k*n + n - 1]`` is a row of the ``(world // n, n)`` mesh:
      ``mesh_dim`` 1 (the groups are the blocks);
    - a strided set ``[c, c + s, c + 2s, ...]`` with ``s = world // n`` is a column of the
      ``(n, world // n)`` mesh: ``mesh_dim`` 0 (the groups are the residues mod ``s``).

    Anything else is not a group of a 2-D mesh: ``ValueError``.  Every rank is in exactly one
    group of that dimension (no idle ranks), and ``n`` divides ``world``.
    """
    n = len(ranks)
    if n == 0 or world % n:
        raise ValueError(f"group {ranks} does not tile {world} ranks into a 2-D mesh")
    if ranks == list(range(ranks[0], ranks[0] + n)) and ranks[0] % n == 0:
        return [list(range(row * n, row * n + n)) for row in range(world // n)], 1
    step = world // n
    if ranks == list(range(ranks[0], world, step)) and ranks[0] < step:
        return [list(range(row * step, row * step + step)) for row in range(n)], 0
    raise ValueError(f"group {ranks} is neither a contiguous block nor a stride-{step} set of {world} ranks: "
                     f"not a dimension of a 2-D mesh")


def _mesh2d(x: torch.Tensor, group: dist.ProcessGroup | None) -> tuple[DeviceMesh, int]:
    """The cached 2-D mesh (and mesh dim) in which ``group`` is a mesh-dimension group.

    ``group=None``: a ``(1, W)`` mesh, gathering along mesh dim 1 = the world.  Otherwise the
    mesh of :func:`mesh2d_layout`, built with ``DeviceMesh.from_group([g0, g1], ...)`` from
    the harness's own group for its dimension and, for the other dimension, groups the harness
    makes and keeps (:func:`harness.core.procedure.make_groups`: a collective over the world, so
    every rank must make its first call for a layout together, which the harness's SPMD calls
    do; their connections are the harness's, not a leak of the variant's).
    """
    world_pg = _pg(None)
    world = dist.get_world_size(world_pg)
    pg = _pg(group)
    ranks = dist.get_process_group_ranks(pg)
    mesh_rows, mesh_dim = mesh2d_layout(ranks, world) if group is not None else ([list(range(world))], 1)
    key = (world_pg.group_name, tuple(tuple(row) for row in mesh_rows), pg.group_name)
    cached = _MESHES.get(key)
    if cached is None:
        mesh_tensor = torch.tensor(mesh_rows, dtype=torch.int)
        other = mesh_tensor.t() if mesh_dim == 1 else mesh_tensor  # groups along the other dim
        other_layout = tuple(tuple(row.tolist()) for row in other)
        make_groups(other_layout)
        mine = made_group(next(members for members in other_layout if dist.get_rank() in members))
        groups = [mine, pg] if mesh_dim == 1 else [pg, mine]
        cached = DeviceMesh.from_group(groups, x.device.type, mesh=mesh_tensor, mesh_dim_names=("dim0", "dim1"))
        _MESHES[key] = cached
    return cached, mesh_dim


def dtensor_mesh2d(x: torch.Tensor, dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``DTensor.from_local(x, mesh2d, placements).full_tensor()`` along one mesh dimension.

    A 2-D mesh as users build it (``init_device_mesh("cpu", (A, B))``), with ``Shard(dim)``
    on the mesh dim whose group is ``group`` and ``Replicate()`` on the other, so
    ``full_tensor`` all-gathers over ``group`` only (:func:`mesh2d_layout` says which layouts
    are possible: contiguous blocks or strided sets tiling the world, no idle ranks).
    Same contract as :func:`dtensor_full_tensor`: equal shapes, any dim, **local** gradient.
    Glue: the mesh is built (once per layout) around the given group.
    """
    mesh, mesh_dim = _mesh2d(x, group)
    placements: list[dtensor.Placement] = [dtensor.Replicate(), dtensor.Replicate()]
    placements[mesh_dim] = dtensor.Shard(dim)
    return dtensor.DTensor.from_local(x, mesh, placements, run_check=False).full_tensor()


def funcol_mesh2d(x: torch.Tensor, gather_dim: int, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``all_gather_single(x, gather_dim, (mesh2d, mesh_dim))``: the ``(DeviceMesh, int)`` form
    on a 2-D mesh (built as in :func:`dtensor_mesh2d`); **sum** gradient."""
    mesh, mesh_dim = _mesh2d(x, group)
    return funcol.all_gather_single(x, gather_dim, (mesh, mesh_dim))
