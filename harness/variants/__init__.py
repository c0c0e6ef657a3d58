"""The variant catalogue: published collective recipes and what their authors claim for them.

Data only: a driver process lists and describes the catalogue without importing variant code
(:mod:`harness.variants.specs`).  Each ``target`` names the code *as its authors wrote it*
(``module:attr``, called as the probe finds it); an adapter remains only where the published API
needs what no call has (an output buffer, an ``args`` namespace).  The claim is the authors', not
the truth: finding where they differ is the harness's job.  ``docs/report.md`` holds the same
table (``tests/test_readme.py``); :data:`NOT_CHECKED` lists torch paths left out, and why.
"""
from __future__ import annotations

from harness.variants.neighbour_entries import NEIGHBOURS
from harness.variants.specs import (
    C10D_ALL_GATHER_SINGLE,
    DTENSOR,
    FUNCOL_ALL_GATHER_SINGLE,
    FUNCOL_VIEW_RACE,
    VariantSpec,
    claim,
)

GATHERS: tuple[VariantSpec, ...] = (
    VariantSpec(
        "pad_to_max_1d",
        "harness.variants.padded:gather_1d",
        claim(ragged=True, dims="0", grad="none", output="list"),
        "The 1-D helper `all_gather(q, ws, device)` of StackOverflow answer 71433508, pasted "
        "into many training scripts: all_gather the local sizes, zero-pad to the max, "
        "all_gather the padded tensors, unpad with `t[:size]`. Claims tensors of different "
        "lengths along dim 0; written for 1-D tensors (`local_size.item()`).",
    ),
    VariantSpec(
        "pad_to_max_nd",
        "harness.variants.padded:all_gather_nd",
        claim(ragged=True, dims="0", grad="none", output="list"),
        "`all_gather_nd(tensor)`, the N-d extension of the same answer: exchanges full "
        "shapes, pads and unpads along dim 0 by the recorded size. Claims ragged dim 0 with "
        "any number of (equal) extra dims.",
    ),
    VariantSpec(
        "pad_unpad_by_value",
        "harness.variants.padded:all_gather_unpad_by_value",
        claim(ragged=True, dims="0", grad="none", output="list"),
        "The common rewrite of the pad-to-max helper that drops padding by value "
        "(`t[t != 0]`, row-wise for N-d) instead of by recorded size. Claims ragged dim 0; "
        "loses genuine zero rows of the data.",
    ),
    VariantSpec(
        "plain_all_gather",
        "harness.variants.plain:gather_equal",
        claim(ragged=False, dims="any", grad="none"),
        "The textbook `dist.all_gather` into a list of `torch.empty_like(x)` followed by "
        "`torch.cat` (MoCo's `concat_all_gather` and its copies). Equal shapes only; no "
        "gradient.",
    ),
    VariantSpec(
        "no_grad_local_trick",
        "harness.variants.plain:gather_local_trick",
        claim(ragged=False, dims="any", grad="local"),
        "Gather under `torch.no_grad()`, then `all_x[rank] = x` before `torch.cat`, the "
        "widespread workaround for 'all_gather has no gradient'. Equal shapes; claims the "
        "local gradient.",
    ),
    VariantSpec(
        "simclr_gather_layer",
        "harness.variants.contrastive:GatherLayer",
        claim(ragged=False, dims="0", grad="local", output="list"),
        "SimCLR's `GatherLayer` autograd.Function (Spijkervet/SimCLR, copied into "
        "solo-learn and OpenSelfSup), called as written: `GatherLayer.apply(x)` all_gathers "
        "into a tuple of per-rank tensors; backward returns `grads[rank]`. Equal shapes; the "
        "local gradient.",
    ),
    VariantSpec(
        "bolts_sync_function",
        "harness.variants.contrastive:SyncFunction",
        claim(ragged=False, dims="0", grad="sum"),
        "lightning-bolts SimCLR `SyncFunction`: all_gather + cat along dim 0, backward "
        "all_reduces (SUM) the cotangent and returns rows rank*batch:(rank+1)*batch. Equal "
        "batches along dim 0; claims the summed gradient.",
    ),
    VariantSpec(
        "clip4clip_all_gather",
        "harness.variants.contrastive:clip4clip",
        claim(ragged=False, dims="0", grad="sum"),
        "CLIP4Clip's `AllGather` autograd.Function: all_gather + cat along dim 0, backward "
        "returns grad_output[rank*batch:(rank+1)*batch] without reduction. Its users rely on "
        "it for a contrastive loss computed on every rank, i.e. believe it sums; it is local. "
        "Adapter: `AllGather.apply(x, args)` needs an `args` namespace (world_size, rank).",
    ),
    VariantSpec(
        "all_gather_into_tensor",
        "harness.variants.into_tensor:gather_into_tensor",
        claim(ragged=False, dims="any", grad="none"),
        "`dist.all_gather_into_tensor` into a [W*n, ...] buffer; the adapter moves `dim` to "
        "the front and back. Equal shapes only, no gradient (deprecated in torch 2.13).",
    ),
    VariantSpec(
        "all_gather_single",
        "harness.variants.into_tensor:gather_single",
        claim(ragged=False, dims="any", grad="none"),
        "`dist.all_gather_single`, torch 2.13's successor of all_gather_into_tensor, with "
        "the same adapter. Equal shapes only, no gradient; absent from older torch.",
        needs=(C10D_ALL_GATHER_SINGLE,),
    ),
    VariantSpec(
        "lucidrains_all_gather",
        "harness.variants.lucidrains:gather",
        claim(ragged=True, dims="any", grad="local", output="first"),
        "lucidrains' `AllGather(dim)` / `all_gather_variable_dim`: pad to the max along any "
        "dim, all_gather, select valid positions with an `arange < size` mask; backward "
        "splits the cotangent by size and keeps this rank's piece (local). The published "
        "module calls `pad_dim_to`/`exists` it never defines; the intended algorithm is used.",
    ),
    VariantSpec(
        "lucidrains_all_reduce",
        "harness.variants.lucidrains:gather_all_reduce_grads",
        claim(ragged=True, dims="any", grad="sum", output="first"),
        "The same with `all_reduce_grads=True`: backward all_reduces (SUM, in place) the "
        "incoming cotangent before splitting it. Claims the summed gradient.",
    ),
    VariantSpec(
        "torch_nn_all_gather",
        "torch.distributed.nn.functional:all_gather",
        claim(ragged=False, dims="0", grad="sum", output="list"),
        "torch's own `torch.distributed.nn.functional.all_gather(tensor, group)`, called as "
        "written: a tuple of per-rank tensors with autograd. Equal shapes; its backward "
        "reduce-scatters the cotangents: the summed gradient.",
    ),
    VariantSpec(
        "torch_nn_all_gather_groups",
        "torch.distributed.nn.functional:all_gather",
        claim(ragged=False, dims="0", grad="sum", output="list", groups=True),
        "The same, given subgroups (`group=`): its documentation names no restriction on the "
        "group. Source of the claim: the `all_gather` docstring in torch/distributed/nn/functional.py.",
    ),
    VariantSpec(
        "all_gather_object",
        "harness.variants.torch_paths:all_gather_object_list",
        claim(ragged=True, dims="any", grad="none", output="list", groups=True),
        "`dist.all_gather_object(out, x, group)`: 'Gathers picklable objects from the whole group "
        "into a list' (its docstring); the list of every rank's tensor, any shapes, no gradient. "
        "Adapter: the caller-allocated output list.",
    ),
    VariantSpec(
        "all_gather_into_tensor_stack",
        "harness.variants.torch_paths:all_gather_into_tensor_stack",
        claim(ragged=False, dims="any", grad="none", output="stack"),
        "`dist.all_gather_into_tensor(out, x)` into a stacked (W, *x.shape) `out`: its docstring "
        "documents 'a stack of all the input tensors along the primary dimension' as an output form. "
        "Adapter: the caller-allocated buffer.",
    ),
    VariantSpec(
        "dtensor_redistribute",
        "harness.variants.torch_paths:dtensor_redistribute",
        claim(ragged=False, dims="any", grad="local", groups=True),
        "DTensor `from_local(x, mesh, [Shard(dim)]).redistribute(mesh, [Replicate()]).to_local()` "
        "on a mesh over the given group: redistribute documents Shard -> Replicate as an all_gather; "
        "from_local without `shape` assumes even shards; the gradient of `to_local` is taken as "
        "replicated, so its backward keeps this rank's chunk (local).",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "dtensor_redistribute_uneven",
        "harness.variants.torch_paths:dtensor_redistribute_uneven",
        claim(ragged=True, dims="any", grad="local"),
        "The same with uneven shards: from_local's docstring says `shape` 'needs to be provided if "
        "the shape of local_tensor are different across the ranks'; given it (and `stride`), any "
        "per-rank lengths are claimed. Glue: one all_reduce of the lengths for the global shape.",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "dtensor_full_tensor",
        "harness.variants.torch_paths:dtensor_full_tensor",
        claim(ragged=False, dims="any", grad="local"),
        "`DTensor.full_tensor()`: 'syntactic sugar' for redistribute to Replicate and to_local "
        "(its docstring); differentiable, the gradient placements replicated by default.",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "dtensor_full_tensor_sum_grad",
        "harness.variants.torch_paths:dtensor_full_tensor_sum_grad",
        claim(ragged=False, dims="any", grad="sum"),
        "`full_tensor(grad_placements=[Partial()])`: the hint that every rank's gradient is a "
        "partial sum, so the backward reduce-scatters it (sum).",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "funcol_all_gather_tensor",
        "harness.variants.torch_paths:funcol_all_gather_tensor",
        claim(ragged=False, dims="0", grad="sum"),
        "`_functional_collectives.all_gather_tensor(x, gather_dim, group)` (deprecated for "
        "all_gather_single, which it calls): 'it currently only supports gather_dim = 0' (its "
        "docstring); autograd is registered on the op (backward: reduce_scatter, sum).",
        race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_tensor_autograd",
        "harness.variants.torch_paths:funcol_all_gather_tensor_autograd",
        claim(ragged=False, dims="0", grad="sum"),
        "`all_gather_tensor_autograd(x, gather_dim, group)`: its docstring claims gradient "
        "propagation across workers (backward: a SUM reduce_scatter) and gather_dim=0 only.",
        race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_single",
        "harness.variants.torch_paths:funcol_all_gather_single",
        claim(ragged=False, dims="0", grad="sum"),
        "`all_gather_single(x, gather_dim, group)`, torch 2.13's name for the functional gather; "
        "same docstring and contract as all_gather_tensor.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_single_autograd",
        "harness.variants.torch_paths:funcol_all_gather_single_autograd",
        claim(ragged=False, dims="0", grad="sum"),
        "`all_gather_single_autograd(x, gather_dim, group)`: as all_gather_tensor_autograd.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "funcol_all_gather_into_tensor_coalesced",
        "harness.variants.torch_paths:funcol_all_gather_into_tensor_coalesced",
        claim(ragged=False, dims="0", grad="sum", output="first"),
        "`all_gather_into_tensor_coalesced([x], group)`: 'Gather a list of tensors ... only supports "
        "gather_dim = 0' (its docstring); one gathered tensor per input. Adapter: the one-element list.",
    ),
    VariantSpec(
        "funcol_all_gather_mesh",
        "harness.variants.torch_paths:funcol_all_gather_mesh",
        claim(ragged=False, dims="0", grad="sum", groups=True),
        "`all_gather_single(x, gather_dim, (mesh, 0))` on `DeviceMesh.from_group(group)`: the "
        "'(DeviceMesh, int): ... one dimension of the DeviceMesh' form, over the drawn subgroups.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "dtensor_mesh2d",
        "harness.variants.torch_paths:dtensor_mesh2d",
        claim(ragged=False, dims="any", grad="local", groups=True, mesh=True),
        "`from_local(x, mesh2d, [Shard(dim), Replicate()]).full_tensor()` (or the mesh dims swapped) "
        "on a 2-D mesh: a gather over one mesh dimension, i.e. a subgroup; local gradient as "
        "full_tensor. Glue: the 2-D mesh is built around the drawn group.",
        needs=(DTENSOR,),
    ),
    VariantSpec(
        "funcol_mesh2d",
        "harness.variants.torch_paths:funcol_mesh2d",
        claim(ragged=False, dims="0", grad="sum", groups=True, mesh=True),
        "`all_gather_single(x, gather_dim, (mesh2d, mesh_dim))` on a 2-D mesh: the same gather "
        "over one mesh dimension; sum gradient.",
        needs=(FUNCOL_ALL_GATHER_SINGLE,), race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "megatron_tensor_parallel",
        "harness.variants.megatron:gather_from_tensor_model_parallel_region",
        claim(ragged=False, dims="-1", grad="local"),
        "Megatron-LM `gather_from_tensor_model_parallel_region` (`megatron/core/tensor_parallel/mappings.py`; "
        "commit in `harness/variants/neighbours.py`): takes no dim, gathers the last; backward keeps this "
        "rank's piece of the last dim (local).",
    ),
    VariantSpec(
        "megatron_tensor_parallel_sum",
        "harness.variants.megatron:all_gather_last_dim_from_tensor_parallel_region",
        claim(ragged=False, dims="-1", grad="sum"),
        "Megatron-LM `all_gather_last_dim_from_tensor_parallel_region`: the same forward; backward "
        "reduce-scatters the cotangents along the last dim (sum).",
    ),
    VariantSpec(
        "megatron_sequence_parallel",
        "harness.variants.megatron:gather_from_sequence_parallel_region",
        claim(ragged=False, dims="0", grad="sum"),
        "Megatron-LM `gather_from_sequence_parallel_region` (`_gather_along_first_dim`; `use_global_buffer` and "
        "`output_split_sizes` left out): gathers dim 0; backward reduce-scatters the cotangents (sum).",
    ),
    VariantSpec(
        "ours_sum",
        "harness.ragged:all_gather_ragged",
        claim(ragged=True, dims="any", grad="sum"),
        "This project's `harness.ragged.all_gather_ragged(x, dim)` with the default "
        "grad='sum': one shape exchange and one all_gather_single of max-padded input; "
        "backward reduce-scatters the padded cotangent slots.",
    ),
    VariantSpec(
        "ours_local",
        "harness.ragged:gather_local",
        claim(ragged=True, dims="any", grad="local"),
        "`all_gather_ragged(x, dim, grad='local')`: same forward; backward takes this "
        "rank's slot of its own cotangent, no collective.",
    ),
    VariantSpec(
        "ours_mean",
        "harness.ragged:gather_mean",
        claim(ragged=True, dims="any", grad="mean"),
        "`all_gather_ragged(x, dim, grad='mean')`: same forward; backward is the summed "
        "gradient divided by the world size.",
    ),
)

#: Every entry, gathers first.
CATALOGUE: tuple[VariantSpec, ...] = (*GATHERS, *NEIGHBOURS)


#: Gather paths torch ships that the catalogue does not check, and why (the report prints them).
NOT_CHECKED: tuple[tuple[str, str], ...] = (
    (
        "scatter_object_list, broadcast_object_list",
        "torch.distributed's object forms of scatter and broadcast from one source rank: their tensor forms "
        "are checked (scatter_nn, bcast_c10d); no adapter fills their in-place object lists yet",
    ),
)


def by_name(name: str) -> VariantSpec:
    """The catalogue entry called ``name``; ``KeyError`` listing the known names otherwise."""
    for spec in CATALOGUE:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in CATALOGUE)
    raise KeyError(f"unknown variant {name!r}; known variants: {known}")
