"""The variant catalogue: published all_gather recipes and what their authors claim for them.

Data only: this module never imports the variant modules, so a driver process can list and
describe the catalogue without importing any variant code (or torch; only :meth:`Need.missing`
imports a torch module, to see whether the installed release has a path).  Each entry's
``target`` names the gather as ``module:attr`` *as its authors wrote it* wherever it can be
called as ``f(x)``, ``f(x, dim)``, with ``dim=``/``group=`` or through ``.apply``, with its
result read by its convention (``output``); ranks import it.  An adapter remains only where
the published API needs what no gather call has (an output buffer, an ``args`` namespace).

The contract is the authors' claim, not the truth: finding where the two differ is the
harness's job.  Every entry, with its origin, claim and verdict, is the catalogue table of
``docs/report.md``, which ``tests/test_readme.py`` keeps equal to :data:`CATALOGUE`.

torch's own paths (``harness.variants.torch_paths``) are described, with what they were found to
do, in ``docs/findings/README.md``; :data:`NOT_CHECKED` lists the ones the catalogue leaves out.  Its length
is the catalogue's: one entry per variant.

One concern: the catalogue as data (specs, needs, claims), no variant code.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from harness.core.contract import ALL_DTYPES, OP_DTYPES, Contract

#: Every dtype gloo can move: all of the harness's names but ``int16``, which gloo rejects.
GLOO_DTYPES: tuple[str, ...] = tuple(name for name in ALL_DTYPES if name != "int16")


@dataclass(frozen=True)
class Need:
    """Names of ``module`` a variant calls that not every supported torch release has.

    ``since`` is the first torch minor release that has every one of them, measured by
    looking them up on each release from the floor (torch 2.4) to the newest
    (docs/torch-versions.md).  Whether they are there is asked of the installed torch
    itself (an import of a torch module, never of variant code), so a backport or a
    removal is seen as it is; ``since`` only words the message.
    """

    module: str
    names: tuple[str, ...]
    since: str

    def missing(self) -> list[str]:
        """The names (``module.name``) the installed torch lacks."""
        try:
            module = importlib.import_module(self.module)
        except ImportError:
            return [self.module]
        return [f"{self.module}.{name}" for name in self.names if not hasattr(module, name)]


def _version_key(since: str) -> tuple[int, ...]:
    return tuple(int(part) for part in since.split("."))


@dataclass(frozen=True)
class KnownRace:
    """A torch race on part of a variant's contract: there its outcome is a matter of timing.

    The catalogue report does not draw that part (``dtypes``) and says so the same way on every
    run (``intermittent (torch race: <doc>)``), whatever this run's timing would have shown;
    the rest of the contract is checked as any variant's.  ``doc`` is the finding, with its
    standalone script; ``shows`` what a run that loses the race sees.
    """

    doc: str
    dtypes: tuple[str, ...]
    shows: str


#: torch 2.13's functional collectives: a complex output view that requires grad is wrapped by
#: autograd after gloo's worker thread may have bumped its version (an error on the rank that
#: loses the race; its peers then wait in the backward's reduce-scatter: a hang).
FUNCOL_VIEW_RACE = KnownRace("docs/findings/funcol_complex_autograd_view_race.md", ("complex64", "complex128"),
                             "values or hang, on complex")


@dataclass(frozen=True)
class VariantSpec:
    """One catalogue entry: a short id, the ``module:attr`` of its gather, its claim (and convention).

    ``needs``: the torch names its code calls that older supported releases lack; where one
    is missing the entry is not run and reports :meth:`unavailable` instead of a verdict.
    ``race``: a known torch race on part of its contract (:class:`KnownRace`).
    """

    name: str
    target: str
    contract: Contract
    origin: str
    needs: tuple[Need, ...] = ()
    race: KnownRace | None = None

    def unavailable(self) -> str:
        """Why the installed torch cannot run this variant, e.g. ``needs torch >= 2.5 (...)``; "" if it can."""
        lacking = [(need, names) for need in self.needs if (names := need.missing())]
        if not lacking:
            return ""
        since = max((need.since for need, _ in lacking), key=_version_key)
        return f"needs torch >= {since} (this torch has no {lacking[0][1][0]})"


#: The public DTensor module's names, there since torch 2.5 (torch 2.4 kept them in the private
#: ``torch.distributed._tensor``; the catalogue checks the public path users are told to use).
DTENSOR = Need("torch.distributed.tensor", ("DTensor", "Shard", "Replicate", "Partial"), since="2.5")
#: ``torch.distributed.all_gather_single``, the successor of ``all_gather_into_tensor``.
C10D_ALL_GATHER_SINGLE = Need("torch.distributed", ("all_gather_single",), since="2.13")
#: The functional collectives' ``all_gather_single`` family (``all_gather_tensor`` is older).
FUNCOL_ALL_GATHER_SINGLE = Need("torch.distributed._functional_collectives",
                                ("all_gather_single", "all_gather_single_autograd"), since="2.13")

#: ``reduce_scatter_single`` (c10d and funcol), the successor of ``reduce_scatter_tensor``: absent
#: in 2.4.1, present in 2.13.0 and 2.15.0 (the releases between not looked up; 2.13 is when its
#: gather twin ``all_gather_single`` arrived).
C10D_REDUCE_SCATTER_SINGLE = Need("torch.distributed", ("reduce_scatter_single",), since="2.13")
FUNCOL_REDUCE_SCATTER_SINGLE = Need("torch.distributed._functional_collectives", ("reduce_scatter_single",),
                                    since="2.13")


def _claim(
    ragged: bool, dims: str, grad: str, output: str = "tensor", groups: bool | None = None, mesh: bool = False,
    collective: str = "gather", op: str = "sum",
) -> Contract:
    """The authors' claim, over every dtype gloo supports (and the reduction is defined for),
    with the result's convention; on subgroups wherever the code takes a group (``groups``
    ``None``: a target that takes a group claims any group), always passing it where ``True``."""
    dtypes = tuple(name for name in GLOO_DTYPES if collective != "reduce-scatter" or name in OP_DTYPES[op])
    return Contract(ragged=ragged, dims=dims, dtypes=dtypes, grad=grad, output=output, groups=groups, mesh=mesh,
                    collective=collective, op=op)


def _reduce_scatter(ragged: bool, dims: str, grad: str, op: str = "sum") -> Contract:
    return _claim(ragged=ragged, dims=dims, grad=grad, collective="reduce-scatter", op=op)


def _all_to_all(ragged: bool, dims: str, grad: str) -> Contract:
    return _claim(ragged=ragged, dims=dims, grad=grad, collective="all-to-all")


def _relayout(ragged: bool, scatter_dim: str, gather_dim: str, grad: str,
              ndims: tuple[int, int] | None = None) -> Contract:
    """A re-layout all-to-all's claim: its dims (``any``: drawn) and the dims of its inputs."""
    return _all_to_all(ragged=ragged, dims="any", grad=grad).with_(scatter_dim=scatter_dim, gather_dim=gather_dim,
                                                                   ndims=ndims)


CATALOGUE: tuple[VariantSpec, ...] = (
    VariantSpec(
        "pad_to_max_1d",
        "harness.variants.padded:gather_1d",
        _claim(ragged=True, dims="0", grad="none", output="list"),
        "The 1-D helper `all_gather(q, ws, device)` of StackOverflow answer 71433508, pasted "
        "into many training scripts: all_gather the local sizes, zero-pad to the max, "
        "all_gather the padded tensors, unpad with `t[:size]`. Claims tensors of different "
        "lengths along dim 0; written for 1-D tensors (`local_size.item()`).",
    ),
    VariantSpec(
        "pad_to_max_nd",
        "harness.variants.padded:all_gather_nd",
        _claim(ragged=True, dims="0", grad="none", output="list"),
        "`all_gather_nd(tensor)`, the N-d extension of the same answer: exchanges full "
        "shapes, pads and unpads along dim 0 by the recorded size. Claims ragged dim 0 with "
        "any number of (equal) extra dims.",
    ),
    VariantSpec(
        "pad_unpad_by_value",
        "harness.variants.padded:all_gather_unpad_by_value",
        _claim(ragged=True, dims="0", grad="none", output="list"),
        "The common rewrite of the pad-to-max helper that drops padding by value "
        "(`t[t != 0]`, row-wise for N-d) instead of by recorded size. Claims ragged dim 0; "
        "loses genuine zero rows of the data.",
    ),
    VariantSpec(
        "plain_all_gather",
        "harness.variants.plain:gather_equal",
        _claim(ragged=False, dims="any", grad="none"),
        "The textbook `dist.all_gather` into a list of `torch.empty_like(x)` followed by "
        "`torch.cat` (MoCo's `concat_all_gather` and its copies). Equal shapes only; no "
        "gradient.",
    ),
    VariantSpec(
        "no_grad_local_trick",
        "harness.variants.plain:gather_local_trick",
        _claim(ragged=False, dims="any", grad="local"),
        "Gather under `torch.no_grad()`, then `all_x[rank] = x` before `torch.cat`, the "
        "widespread workaround for 'all_gather has no gradient'. Equal shapes; claims the "
        "local gradient.",
    ),
    VariantSpec(
        "simclr_gather_layer",
        "harness.variants.contrastive:GatherLayer",
        _claim(ragged=False, dims="0", grad="local", output="list"),
        "SimCLR's `GatherLayer` autograd.Function (Spijkervet/SimCLR, copied into "
        "solo-learn and OpenSelfSup), called as written: `GatherLayer.apply(x)` all_gathers "
        "into a tuple of per-rank tensors; backward returns `grads[rank]`. Equal shapes; the "
        "local gradient.",
    ),
    VariantSpec(
        "bolts_sync_function",
        "harness.variants.contrastive:SyncFunction",
        _claim(ragged=False, dims="0", grad="sum"),
        "lightning-bolts SimCLR `SyncFunction`: all_gather + cat along dim 0, backward "
        "all_reduces (SUM) the cotangent and returns rows rank*batch:(rank+1)*batch. Equal "
        "batches along dim 0; claims the summed gradient.",
    ),
    VariantSpec(
        "clip4clip_all_gather",
        "harness.variants.contrastive:clip4clip",
        _claim(ragged=False, dims="0", grad="sum"),
        "CLIP4Clip's `AllGather` autograd.Function: all_gather + cat along dim 0, backward "
        "returns grad_output[rank*batch:(rank+1)*batch] without reduction. Its users rely on "
        "it for a contrastive loss computed on every rank, i.e. believe it sums; it is local. "
        "Adapter: `AllGather.apply(x, args)` needs an `args` namespace (world_size, rank).",
    ),
    VariantSpec(
        "all_gather_into_tensor",
        "harness.variants.into_tensor:gather_into_tensor",
        _claim(ragged=False, dims="any", grad="none"),
        "`dist.all_gather_into_tensor` into a [W*n, ...] buffer; the adapter moves `dim` to "
        "the front and back. Equal shapes only, no gradient (deprecated in torch 2.13).",
    ),
    VariantSpec(
        "all_gather_single",
        "harness.variants.into_tensor:gather_single",
        _claim(ragged=False, dims="any", grad="none"),
        "`dist.all_gather_single`, torch 2.13's successor of all_gather_into_tensor, with "
        "the same adapter. Equal shapes only, no gradient; absent from older torch.",
        needs=(C10D_ALL_GATHER_SINGLE,),
    ),
    VariantSpec(
        "lucidrains_all_gather",
        "harness.variants.lucidrains:gather",
        _claim(ragged=True, dims="any", grad="local", output="first"),
        "lucidrains' `AllGather(dim)` / `all_gather_variable_dim`: pad to the max along any "
        "dim, all_gather, select valid positions with an `arange < size` mask; backward "
        "splits the cotangent by size and keeps this rank's piece (local). The published "
        "module calls `pad_dim_to`/`exists` it never defines; the intended algorithm is used.",
    ),
    VariantSpec(
        "lucidrains_all_reduce",
        "harness.variants.lucidrains:gather_all_reduce_grads",
        _claim(ragged=True, dims="any", grad="sum", output="first"),
        "The same with `all_reduce_grads=True`: backward all_reduces (SUM, in place) the "
        "incoming cotangent before splitting it. Claims the summed gradient.",
    ),
    VariantSpec(
        "torch_nn_all_gather",
        "torch.distributed.nn.functional:all_gather",
        _claim(ragged=False, dims="0", grad="sum", output="list"),
        "torch's own `torch.distributed.nn.functional.all_gather(tensor, group)`, called as "
        "written: a tuple of per-rank tensors with autograd. Equal shapes; its backward "
        "reduce-scatters the cotangents: the summed gradient.",
    ),
    VariantSpec(
        "torch_nn_all_gather_groups",
        "torch.distributed.nn.functional:all_gather",
        _claim(ragged=False, dims="0", grad="sum", output="list", groups=True),
        "The same, given subgroups (`group=`): its documentation names no restriction on the "
        "group. Source of the claim: the `all_gather` docstring in torch/distributed/nn/functional.py.",
    ),
    VariantSpec(
        "all_gather_object",
        "harness.variants.torch_paths:all_gather_object_list",
        _claim(ragged=True, dims="any", grad="none", output="list", groups=True),
        "`dist.all_gather_object(out, x, group)`: 'Gathers picklable objects from the whole group "
        "into a list' (its docstring); the list of every rank's tensor, any shapes, no gradient. "
        "Adapter: the caller-allocated output list.",
    ),
    VariantSpec(
        "all_gather_into_tensor_stack",
        "harness.variants.torch_paths:all_gather_into_tensor_stack",
        _claim(ragged=False, dims="any", grad="none", output="stack"),
        "`dist.all_gather_into_tensor(out, x)` into a stacked (W, *x.shape) `out`: its docstring "
        "documents 'a stack of all the input tensors along the primary dimension' as an output form. "
        "Adapter: the caller-allocated buffer.",
    ),
    VariantSpec(
        "dtensor_redistribute",
        "harness.variants.torch_paths:dtensor_redistribute",
        _claim(ragged=False, dims="any", grad="local", groups=True),
        "DTensor `from_local(x, mesh, [Shard(dim)]).redistribute(mesh, [Replicate()]).to_local()` "
        "on a mesh over the given group: redistribute documents Shard -> Replicate as an all_gather; "
        "from_local without `shape` assumes even shards; the gradient of `to_local` is taken as "
        "replicated, so its backward keeps this rank's chunk (local).",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "dtensor_redistribute_uneven",
        "harness.variants.torch_paths:dtensor_redistribute_uneven",
        _claim(ragged=True, dims="any", grad="local"),
        "The same with uneven shards: from_local's docstring says `shape` 'needs to be provided if "
        "the shape of local_tensor are different across the ranks'; given it (and `stride`), any "
        "per-rank lengths are claimed. Glue: one all_reduce of the lengths for the global shape.",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "dtensor_full_tensor",
        "harness.variants.torch_paths:dtensor_full_tensor",
        _claim(ragged=False, dims="any", grad="local"),
        "`DTensor.full_tensor()`: 'syntactic sugar' for redistribute to Replicate and to_local "
        "(its docstring); differentiable, the gradient placements replicated by default.",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "dtensor_full_tensor_sum_grad",
        "harness.variants.torch_paths:dtensor_full_tensor_sum_grad",
        _claim(ragged=False, dims="any", grad="sum"),
        "`full_tensor(grad_placements=[Partial()])`: the hint that every rank's gradient is a "
        "partial sum, so the backward reduce-scatters it (sum).",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "funcol_all_gather_tensor",
        "harness.variants.torch_paths:funcol_all_gather_tensor",
        _claim(ragged=False, dims="0", grad="sum"),
        "`_functional_collectives.all_gather_tensor(x, gather_dim, group)` (deprecated for "
        "all_gather_single, which it calls): 'it currently only supports gather_dim = 0' (its "
        "docstring); autograd is registered on the op (backward: reduce_scatter, sum).",
        race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_tensor_autograd",
        "harness.variants.torch_paths:funcol_all_gather_tensor_autograd",
        _claim(ragged=False, dims="0", grad="sum"),
        "`all_gather_tensor_autograd(x, gather_dim, group)`: its docstring claims gradient "
        "propagation across workers (backward: a SUM reduce_scatter) and gather_dim=0 only.",
        race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_single",
        "harness.variants.torch_paths:funcol_all_gather_single",
        _claim(ragged=False, dims="0", grad="sum"),
        "`all_gather_single(x, gather_dim, group)`, torch 2.13's name for the functional gather; "
        "same docstring and contract as all_gather_tensor.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_single_autograd",
        "harness.variants.torch_paths:funcol_all_gather_single_autograd",
        _claim(ragged=False, dims="0", grad="sum"),
        "`all_gather_single_autograd(x, gather_dim, group)`: as all_gather_tensor_autograd.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_into_tensor_coalesced",
        "harness.variants.torch_paths:funcol_all_gather_into_tensor_coalesced",
        _claim(ragged=False, dims="0", grad="sum", output="first"),
        "`all_gather_into_tensor_coalesced([x], group)`: 'Gather a list of tensors ... only supports "
        "gather_dim = 0' (its docstring); one gathered tensor per input. Adapter: the one-element list.",
    ),
    VariantSpec(
        "funcol_all_gather_mesh",
        "harness.variants.torch_paths:funcol_all_gather_mesh",
        _claim(ragged=False, dims="0", grad="sum", groups=True),
        "`all_gather_single(x, gather_dim, (mesh, 0))` on `DeviceMesh.from_group(group)`: the "
        "'(DeviceMesh, int): ... one dimension of the DeviceMesh' form, over the drawn subgroups.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "dtensor_mesh2d",
        "harness.variants.torch_paths:dtensor_mesh2d",
        _claim(ragged=False, dims="any", grad="local", groups=True, mesh=True),
        "`from_local(x, mesh2d, [Shard(dim), Replicate()]).full_tensor()` (or the mesh dims swapped) "
        "on a 2-D mesh: a gather over one mesh dimension, i.e. a subgroup; local gradient as "
        "full_tensor. Glue: the 2-D mesh is built around the drawn group.",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "funcol_mesh2d",
        "harness.variants.torch_paths:funcol_mesh2d",
        _claim(ragged=False, dims="0", grad="sum", groups=True, mesh=True),
        "`all_gather_single(x, gather_dim, (mesh2d, mesh_dim))` on a 2-D mesh: the same gather "
        "over one mesh dimension; sum gradient.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "megatron_tensor_parallel",
        "harness.variants.megatron:gather_from_tensor_model_parallel_region",
        _claim(ragged=False, dims="-1", grad="local"),
        "Megatron-LM `gather_from_tensor_model_parallel_region` (`megatron/core/tensor_parallel/mappings.py`; "
        "commit in `harness/variants/neighbours.py`): takes no dim, gathers the last; backward keeps this "
        "rank's piece of the last dim (local).",
    ),
    VariantSpec(
        "megatron_tensor_parallel_sum",
        "harness.variants.megatron:all_gather_last_dim_from_tensor_parallel_region",
        _claim(ragged=False, dims="-1", grad="sum"),
        "Megatron-LM `all_gather_last_dim_from_tensor_parallel_region`: the same forward; backward "
        "reduce-scatters the cotangents along the last dim (sum).",
    ),
    VariantSpec(
        "ours_sum",
        "harness.ragged:all_gather_ragged",
        _claim(ragged=True, dims="any", grad="sum"),
        "This project's `harness.ragged.all_gather_ragged(x, dim)` with the default "
        "grad='sum': one shape exchange and one all_gather_single of max-padded input; "
        "backward reduce-scatters the padded cotangent slots.",
    ),
    VariantSpec(
        "ours_local",
        "harness.ragged:gather_local",
        _claim(ragged=True, dims="any", grad="local"),
        "`all_gather_ragged(x, dim, grad='local')`: same forward; backward takes this "
        "rank's slot of its own cotangent, no collective.",
    ),
    VariantSpec(
        "ours_mean",
        "harness.ragged:gather_mean",
        _claim(ragged=True, dims="any", grad="mean"),
        "`all_gather_ragged(x, dim, grad='mean')`: same forward; backward is the summed "
        "gradient divided by the world size.",
    ),
    VariantSpec(
        "ours_reduce_scatter_sum",
        "harness.ragged:reduce_scatter_sum",
        _reduce_scatter(ragged=True, dims="any", grad="adjoint"),
        "`harness.ragged.reduce_scatter_ragged(x, dim, split_sizes)`: every slot zero-padded to the "
        "longest, one reduce-scatter; backward gathers the cotangents (the adjoint). Ragged slots, any "
        "dim, complex as its real view.",
    ),
    VariantSpec(
        "ours_reduce_scatter_mean",
        "harness.ragged:reduce_scatter_mean",
        _reduce_scatter(ragged=True, dims="any", grad="adjoint", op="mean"),
        "The same with `op='mean'`: the sum divided by the world size, backward the gathered "
        "cotangents divided by it too.",
    ),
    VariantSpec(
        "ours_reduce_scatter_max",
        "harness.ragged:reduce_scatter_max",
        _reduce_scatter(ragged=True, dims="any", grad="none", op="max"),
        "The same with `op='max'`: slots padded with the dtype's lowest value; no gradient.",
    ),
    VariantSpec(
        "ours_all_to_all",
        "harness.ragged:all_to_all",
        _all_to_all(ragged=True, dims="any", grad="adjoint"),
        "`harness.ragged.all_to_all_ragged(x, dim, input_split_sizes, output_split_sizes)`: one "
        "`all_to_all_single` with the dim moved to the front; backward the same with the splits "
        "swapped. Ragged splits (zero-length ones too), any dim.",
    ),
    VariantSpec(
        "rs_reduce_scatter_single",
        "harness.variants.neighbours:reduce_scatter_single",
        _reduce_scatter(ragged=False, dims="0", grad="none"),
        "`dist.reduce_scatter_single(out, x)` (torch 2.13's name for `reduce_scatter_tensor`): equal slots along dim 0, summed; not differentiable.",
        needs=(C10D_REDUCE_SCATTER_SINGLE,),
    ),
    VariantSpec(
        "rs_reduce_scatter_tensor",
        "harness.variants.neighbours:reduce_scatter_tensor",
        _reduce_scatter(ragged=False, dims="0", grad="none"),
        "`dist.reduce_scatter_tensor(out, x)`: equal slots along dim 0, summed; not differentiable.",
    ),
    VariantSpec(
        "rs_reduce_scatter_tensor_max",
        "harness.variants.neighbours:reduce_scatter_tensor_max",
        _reduce_scatter(ragged=False, dims="0", grad="none", op="max"),
        "The same with `op=ReduceOp.MAX`.",
    ),
    VariantSpec(
        "rs_reduce_scatter_list",
        "harness.variants.neighbours:reduce_scatter_list",
        _reduce_scatter(ragged=True, dims="any", grad="none"),
        "`dist.reduce_scatter(out, list(x.split(split_sizes, dim)))`: the list API, ragged slots along any dim as its callers split them; not differentiable.",
    ),
    VariantSpec(
        "rs_funcol_reduce_scatter_single",
        "harness.variants.neighbours:funcol_reduce_scatter_single",
        _reduce_scatter(ragged=False, dims="any", grad="adjoint"),
        "`_functional_collectives.reduce_scatter_single(x, 'sum', scatter_dim, group)`: equal slots along any dim; differentiable through funcol's autograd registration.",
        needs=(FUNCOL_REDUCE_SCATTER_SINGLE,),
    ),
    VariantSpec(
        "rs_funcol_reduce_scatter_tensor",
        "harness.variants.neighbours:funcol_reduce_scatter_tensor",
        _reduce_scatter(ragged=False, dims="any", grad="adjoint"),
        "`_functional_collectives.reduce_scatter_tensor(x, 'sum', scatter_dim, group)` (deprecated alias).",
    ),
    VariantSpec(
        "rs_funcol_reduce_scatter_tensor_autograd",
        "harness.variants.neighbours:funcol_reduce_scatter_tensor_autograd",
        _reduce_scatter(ragged=False, dims="any", grad="adjoint"),
        "`reduce_scatter_tensor_autograd`: the explicitly differentiable form.",
    ),
    VariantSpec(
        "rs_nn_reduce_scatter",
        "harness.variants.neighbours:nn_reduce_scatter",
        _reduce_scatter(ragged=True, dims="any", grad="adjoint"),
        "`torch.distributed.nn.functional.reduce_scatter(out, list(x.split(split_sizes, dim)))`: differentiable list API.",
    ),
    VariantSpec(
        "rs_megatron_sequence_parallel",
        "harness.variants.neighbours:reduce_scatter_to_sequence_parallel_region",
        _reduce_scatter(ragged=False, dims="0", grad="adjoint"),
        "Megatron-LM `_ReduceScatterToSequenceParallelRegion` (`megatron/core/tensor_parallel/mappings.py`; commit and lines in `harness/variants/neighbours.py`): reduce-scatter along dim 0, backward `_gather_along_first_dim`.",
    ),
    VariantSpec(
        "rs_megatron_ragged",
        "harness.variants.neighbours:megatron_reduce_scatter_ragged",
        _reduce_scatter(ragged=True, dims="0", grad="adjoint"),
        "The same class with its `input_split_sizes` (ragged slots along dim 0).",
    ),
    VariantSpec(
        "rs_megatron_tensor_parallel",
        "harness.variants.neighbours:reduce_scatter_last_dim_to_tensor_parallel_region",
        _reduce_scatter(ragged=False, dims="-1", grad="adjoint"),
        "Megatron-LM `reduce_scatter_last_dim_to_tensor_parallel_region`: reduce-scatter along the last dim "
        "(equal slots), backward `_gather_along_last_dim`.",
    ),
    VariantSpec(
        "a2a_all_to_all_single",
        "harness.variants.neighbours:all_to_all_single",
        _all_to_all(ragged=True, dims="0", grad="none"),
        "`dist.all_to_all_single(out, x, output_split_sizes, input_split_sizes)`: ragged splits along dim 0; not differentiable.",
    ),
    VariantSpec(
        "a2a_all_to_all_list",
        "harness.variants.neighbours:all_to_all_list",
        _all_to_all(ragged=True, dims="any", grad="none"),
        "`dist.all_to_all(outs, list(x.split(input_split_sizes, dim)))`, then `torch.cat(outs, dim)`: the list API.",
    ),
    VariantSpec(
        "a2a_funcol_all_to_all_single",
        "harness.variants.neighbours:funcol_all_to_all_single",
        _all_to_all(ragged=True, dims="0", grad="adjoint"),
        "`_functional_collectives.all_to_all_single(x, output_split_sizes, input_split_sizes, group)`.",
    ),
    VariantSpec(
        "a2a_funcol_all_to_all_single_autograd",
        "harness.variants.neighbours:funcol_all_to_all_single_autograd",
        _all_to_all(ragged=True, dims="0", grad="adjoint"),
        "`all_to_all_single_autograd`: the explicitly differentiable form.",
    ),
    VariantSpec(
        "a2a_nn_all_to_all_single",
        "harness.variants.neighbours:nn_all_to_all_single",
        _all_to_all(ragged=True, dims="0", grad="adjoint"),
        "`torch.distributed.nn.functional.all_to_all_single(out, x, output_split_sizes, input_split_sizes)`.",
    ),
    VariantSpec(
        "a2a_nn_all_to_all",
        "harness.variants.neighbours:nn_all_to_all",
        _all_to_all(ragged=True, dims="any", grad="adjoint"),
        "`torch.distributed.nn.functional.all_to_all(outs, list(x.split(...)))`, then `torch.cat`.",
    ),
    VariantSpec(
        "a2a_megatron",
        "harness.variants.neighbours:megatron_all_to_all",
        _all_to_all(ragged=True, dims="0", grad="adjoint"),
        "Megatron-LM `_AllToAll` (`mappings.py`): `all_to_all_single` with output/input split sizes, backward the same with them swapped.",
    ),
    VariantSpec(
        "a2a_deepspeed_moe",
        "harness.variants.neighbours:deepspeed_all_to_all",
        _all_to_all(ragged=False, dims="0", grad="adjoint"),
        "DeepSpeed MoE `_AllToAll` (`deepspeed/moe/sharded_moe.py`): equal chunks along dim 0, backward the same all-to-all (its own adjoint for equal chunks). Adapter: `_AllToAll.apply(group, x)` takes the group first.",
    ),
    VariantSpec(
        "a2a_fairseq_moe",
        "harness.variants.neighbours:fairseq_all_to_all",
        _all_to_all(ragged=False, dims="0", grad="adjoint"),
        "fairseq MoE `_AllToAll` (`fairseq/modules/moe/moe_layer.py`): equal chunks along dim 0. Adapter: group first, as DeepSpeed's.",
    ),
    VariantSpec(
        "a2a_ours_relayout",
        "harness.ragged:relayout",
        _relayout(ragged=True, scatter_dim="any", gather_dim="any", grad="adjoint"),
        "`harness.ragged.relayout_ragged(x, scatter_dim, gather_dim, group=)`: sequence parallelism's re-layout, any two dims, uneven heads (as `tensor_split` cuts them) and sequence lengths.",
    ),
    VariantSpec(
        "a2a_deepspeed_ulysses",
        "harness.variants.relayouts:DeepSpeedSeqAllToAll",
        _relayout(ragged=False, scatter_dim="2", gather_dim="0", grad="adjoint", ndims=(4, 4)),
        "DeepSpeed-Ulysses `_SeqAllToAll.apply(group, input, scatter_idx, gather_idx)` (`deepspeed/sequence/layer.py`, before `batch_dim_idx`): heads for sequence on (s, b, h, d), as `DistributedAttention` calls it; the backward swaps the dims.",
    ),
    VariantSpec(
        "a2a_yunchang_ulysses",
        "harness.variants.relayouts:YunchangSeqAllToAll4D",
        _relayout(ragged=False, scatter_dim="2", gather_dim="1", grad="adjoint", ndims=(4, 4)),
        "yunchang `SeqAllToAll4D.apply(group, input, scatter_idx, gather_idx)` (`yunchang/comm/all_to_all.py`): heads for sequence on (b, s, h, d), 4-d only.",
    ),
    VariantSpec(
        "a2a_colossalai_relayout",
        "harness.variants.relayouts:colossalai_all_to_all",
        _relayout(ragged=False, scatter_dim="any", gather_dim="any", grad="adjoint"),
        "ColossalAI `all_to_all_comm(input_, process_group, scatter_dim, gather_dim)` (`colossalai/shardformer/layer/_operation.py`): `tensor_split`, list `all_to_all`, `cat`; any two dims.",
    ),
)


#: Gather paths torch ships that the catalogue does not check, and why (the report prints them).
NOT_CHECKED: tuple[tuple[str, str], ...] = (
    (
        "gather_object",
        "torch.distributed.gather_object gathers to one destination rank; every other "
        "rank gets None, so the every-rank-gets-the-result contract does not apply",
    ),
)


def by_name(name: str) -> VariantSpec:
    """The catalogue entry called ``name``; ``KeyError`` listing the known names otherwise."""
    for spec in CATALOGUE:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in CATALOGUE)
    raise KeyError(f"unknown variant {name!r}; known variants: {known}")
