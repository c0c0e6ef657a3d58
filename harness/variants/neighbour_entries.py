"""The catalogue's reduce-scatter, all-to-all (re-layouts included), all-reduce, split, copy and rooted (broadcast,
scatter, reduce, gather to one rank) entries, as their authors claim them.

Data only, like :mod:`harness.variants`, which lists them after the gathers.
"""

from __future__ import annotations

from harness.variants.specs import (
    C10D_REDUCE_SCATTER_SINGLE,
    FUNCOL_REDUCE_SCATTER_SINGLE,
    FUNCOL_VIEW_RACE,
    VariantSpec,
    all_reduce_claim,
    all_to_all_claim,
    claim,
    reduce_scatter_claim,
    relayout_claim,
)

NEIGHBOURS: tuple[VariantSpec, ...] = (
    VariantSpec(
        "ours_reduce_scatter_sum",
        "harness.ragged:reduce_scatter_sum",
        reduce_scatter_claim(ragged=True, dims="any", grad="adjoint"),
        "`harness.ragged.reduce_scatter_ragged(x, dim, split_sizes)`: every slot zero-padded to the "
        "longest, one reduce-scatter; backward gathers the cotangents (the adjoint). Ragged slots, any "
        "dim, complex as its real view.",
    ),
    VariantSpec(
        "ours_reduce_scatter_mean",
        "harness.ragged:reduce_scatter_mean",
        reduce_scatter_claim(ragged=True, dims="any", grad="adjoint", op="mean"),
        "The same with `op='mean'`: the sum divided by the world size, backward the gathered "
        "cotangents divided by it too.",
    ),
    VariantSpec(
        "ours_reduce_scatter_max",
        "harness.ragged:reduce_scatter_max",
        reduce_scatter_claim(ragged=True, dims="any", grad="none", op="max"),
        "The same with `op='max'`: slots padded with the dtype's lowest value; no gradient.",
    ),
    VariantSpec(
        "ours_all_to_all",
        "harness.ragged:all_to_all",
        all_to_all_claim(ragged=True, dims="any", grad="adjoint"),
        "`harness.ragged.all_to_all_ragged(x, dim, input_split_sizes, output_split_sizes)`: one "
        "`all_to_all_single` with the dim moved to the front; backward the same with the splits "
        "swapped. Ragged splits (zero-length ones too), any dim.",
    ),
    VariantSpec(
        "rs_reduce_scatter_single",
        "harness.variants.neighbours:reduce_scatter_single",
        reduce_scatter_claim(ragged=False, dims="0", grad="none"),
        "`dist.reduce_scatter_single(out, x)` (torch 2.13's name for `reduce_scatter_tensor`): equal slots along dim 0, summed; not differentiable.",
        needs=(C10D_REDUCE_SCATTER_SINGLE,),
    ),
    VariantSpec(
        "rs_reduce_scatter_tensor",
        "harness.variants.neighbours:reduce_scatter_tensor",
        reduce_scatter_claim(ragged=False, dims="0", grad="none"),
        "`dist.reduce_scatter_tensor(out, x)`: equal slots along dim 0, summed; not differentiable.",
    ),
    VariantSpec(
        "rs_reduce_scatter_tensor_max",
        "harness.variants.neighbours:reduce_scatter_tensor_max",
        reduce_scatter_claim(ragged=False, dims="0", grad="none", op="max"),
        "The same with `op=ReduceOp.MAX`.",
    ),
    VariantSpec(
        "rs_reduce_scatter_list",
        "harness.variants.neighbours:reduce_scatter_list",
        reduce_scatter_claim(ragged=True, dims="any", grad="none"),
        "`dist.reduce_scatter(out, list(x.split(split_sizes, dim)))`: the list API, ragged slots along any dim as its callers split them; not differentiable.",
    ),
    VariantSpec(
        "rs_funcol_reduce_scatter_single",
        "harness.variants.neighbours:funcol_reduce_scatter_single",
        reduce_scatter_claim(ragged=False, dims="any", grad="adjoint"),
        "`_functional_collectives.reduce_scatter_single(x, 'sum', scatter_dim, group)`: equal slots along any dim; differentiable through funcol's autograd registration.",
        needs=(FUNCOL_REDUCE_SCATTER_SINGLE,),
    ),
    VariantSpec(
        "rs_funcol_reduce_scatter_tensor",
        "harness.variants.neighbours:funcol_reduce_scatter_tensor",
        reduce_scatter_claim(ragged=False, dims="any", grad="adjoint"),
        "`_functional_collectives.reduce_scatter_tensor(x, 'sum', scatter_dim, group)` (deprecated alias).",
    ),
    VariantSpec(
        "rs_funcol_reduce_scatter_tensor_autograd",
        "harness.variants.neighbours:funcol_reduce_scatter_tensor_autograd",
        reduce_scatter_claim(ragged=False, dims="any", grad="adjoint"),
        "`reduce_scatter_tensor_autograd`: the explicitly differentiable form.",
    ),
    VariantSpec(
        "rs_nn_reduce_scatter",
        "harness.variants.neighbours:nn_reduce_scatter",
        reduce_scatter_claim(ragged=True, dims="any", grad="adjoint"),
        "`torch.distributed.nn.functional.reduce_scatter(out, list(x.split(split_sizes, dim)))`: differentiable list API.",
    ),
    VariantSpec(
        "rs_megatron_sequence_parallel",
        "harness.variants.megatron:reduce_scatter_to_sequence_parallel_region",
        reduce_scatter_claim(ragged=False, dims="0", grad="adjoint"),
        "Megatron-LM `_ReduceScatterToSequenceParallelRegion` (`megatron/core/tensor_parallel/mappings.py`; commit and lines in `harness/variants/neighbours.py`): reduce-scatter along dim 0, backward `_gather_along_first_dim`.",
    ),
    VariantSpec(
        "rs_megatron_ragged",
        "harness.variants.megatron:megatron_reduce_scatter_ragged",
        reduce_scatter_claim(ragged=True, dims="0", grad="adjoint"),
        "The same class with its `input_split_sizes` (ragged slots along dim 0).",
    ),
    VariantSpec(
        "rs_megatron_tensor_parallel",
        "harness.variants.megatron:reduce_scatter_last_dim_to_tensor_parallel_region",
        reduce_scatter_claim(ragged=False, dims="-1", grad="adjoint"),
        "Megatron-LM `reduce_scatter_last_dim_to_tensor_parallel_region`: reduce-scatter along the last dim "
        "(equal slots), backward `_gather_along_last_dim`.",
    ),
    VariantSpec(
        "a2a_all_to_all_single",
        "harness.variants.neighbours:all_to_all_single",
        all_to_all_claim(ragged=True, dims="0", grad="none"),
        "`dist.all_to_all_single(out, x, output_split_sizes, input_split_sizes)`: ragged splits along dim 0; not differentiable.",
    ),
    VariantSpec(
        "a2a_all_to_all_list",
        "harness.variants.neighbours:all_to_all_list",
        all_to_all_claim(ragged=True, dims="any", grad="none"),
        "`dist.all_to_all(outs, list(x.split(input_split_sizes, dim)))`, then `torch.cat(outs, dim)`: the list API.",
    ),
    VariantSpec(
        "a2a_funcol_all_to_all_single",
        "harness.variants.neighbours:funcol_all_to_all_single",
        all_to_all_claim(ragged=True, dims="0", grad="adjoint"),
        "`_functional_collectives.all_to_all_single(x, output_split_sizes, input_split_sizes, group)`.",
    ),
    VariantSpec(
        "a2a_funcol_all_to_all_single_autograd",
        "harness.variants.neighbours:funcol_all_to_all_single_autograd",
        all_to_all_claim(ragged=True, dims="0", grad="adjoint"),
        "`all_to_all_single_autograd`: the explicitly differentiable form.",
    ),
    VariantSpec(
        "a2a_nn_all_to_all_single",
        "harness.variants.neighbours:nn_all_to_all_single",
        all_to_all_claim(ragged=True, dims="0", grad="adjoint"),
        "`torch.distributed.nn.functional.all_to_all_single(out, x, output_split_sizes, input_split_sizes)`.",
    ),
    VariantSpec(
        "a2a_nn_all_to_all",
        "harness.variants.neighbours:nn_all_to_all",
        all_to_all_claim(ragged=True, dims="any", grad="adjoint"),
        "`torch.distributed.nn.functional.all_to_all(outs, list(x.split(...)))`, then `torch.cat`.",
    ),
    VariantSpec(
        "a2a_megatron",
        "harness.variants.megatron:megatron_all_to_all",
        all_to_all_claim(ragged=True, dims="0", grad="adjoint"),
        "Megatron-LM `_AllToAll` (`mappings.py`): `all_to_all_single` with output/input split sizes, backward the same with them swapped.",
    ),
    VariantSpec(
        "a2a_deepspeed_moe",
        "harness.variants.neighbours:deepspeed_all_to_all",
        all_to_all_claim(ragged=False, dims="0", grad="adjoint"),
        "DeepSpeed MoE `_AllToAll` (`deepspeed/moe/sharded_moe.py`): equal chunks along dim 0, backward the same all-to-all (its own adjoint for equal chunks). Adapter: `_AllToAll.apply(group, x)` takes the group first.",
    ),
    VariantSpec(
        "a2a_fairseq_moe",
        "harness.variants.neighbours:fairseq_all_to_all",
        all_to_all_claim(ragged=False, dims="0", grad="adjoint"),
        "fairseq MoE `_AllToAll` (`fairseq/modules/moe/moe_layer.py`): equal chunks along dim 0. Adapter: group first, as DeepSpeed's.",
    ),
    VariantSpec(
        "a2a_ours_relayout",
        "harness.ragged:relayout",
        relayout_claim(ragged=True, scatter_dim="any", gather_dim="any", grad="adjoint"),
        "`harness.ragged.relayout_ragged(x, scatter_dim, gather_dim, group=)`: sequence parallelism's re-layout, any two dims, uneven heads (as `tensor_split` cuts them) and sequence lengths.",
    ),
    VariantSpec(
        "a2a_deepspeed_ulysses",
        "harness.variants.relayouts:DeepSpeedSeqAllToAll",
        relayout_claim(ragged=False, scatter_dim="2", gather_dim="0", grad="adjoint", ndims=(4, 4)),
        "DeepSpeed-Ulysses `_SeqAllToAll.apply(group, input, scatter_idx, gather_idx)` (`deepspeed/sequence/layer.py`, before `batch_dim_idx`): heads for sequence on (s, b, h, d), as `DistributedAttention` calls it; the backward swaps the dims.",
    ),
    VariantSpec(
        "a2a_yunchang_ulysses",
        "harness.variants.relayouts:YunchangSeqAllToAll4D",
        relayout_claim(ragged=False, scatter_dim="2", gather_dim="1", grad="adjoint", ndims=(4, 4)),
        "yunchang `SeqAllToAll4D.apply(group, input, scatter_idx, gather_idx)` (`yunchang/comm/all_to_all.py`): heads for sequence on (b, s, h, d), 4-d only.",
    ),
    VariantSpec(
        "a2a_colossalai_relayout",
        "harness.variants.relayouts:colossalai_all_to_all",
        relayout_claim(ragged=False, scatter_dim="any", gather_dim="any", grad="adjoint"),
        "ColossalAI `all_to_all_comm(input_, process_group, scatter_dim, gather_dim)` (`colossalai/shardformer/layer/_operation.py`): `tensor_split`, list `all_to_all`, `cat`; any two dims.",
    ),
    VariantSpec(
        "ours_all_reduce_sum",
        "harness.ragged:all_reduce_sum",
        all_reduce_claim(grad="sum"),
        "`harness.ragged.all_reduce(x, op='sum', grad='sum')`: a dense copy all-reduced (complex as its real "
        "view); backward all-reduces the cotangents (every rank's loss uses the result).",
    ),
    VariantSpec(
        "ours_all_reduce_mean",
        "harness.ragged:all_reduce_mean",
        all_reduce_claim(grad="mean", op="mean"),
        "The same with `op='mean'`: the sum divided by W last; backward the cotangents' mean.",
    ),
    VariantSpec(
        "ours_all_reduce_identity",
        "harness.ragged:all_reduce_identity",
        all_reduce_claim(grad="identity"),
        "The same summing, `grad='identity'`: each rank its own cotangent, Megatron's reduce-from-region "
        "contract (the ranks' partial sums feed one loss).",
    ),
    VariantSpec(
        "ours_all_reduce_max",
        "harness.ragged:all_reduce_max",
        all_reduce_claim(grad="none", op="max"),
        "The same with `op='max'`; no gradient.",
    ),
    VariantSpec(
        "ar_c10d_all_reduce",
        "torch.distributed:all_reduce",
        all_reduce_claim(grad="none"),
        "`dist.all_reduce(x, group=group)` called as written: no result, x written in place (read as its "
        "result); not differentiable.",
    ),
    VariantSpec(
        "ar_nn_all_reduce",
        "torch.distributed.nn.functional:all_reduce",
        all_reduce_claim(grad="sum"),
        "`torch.distributed.nn.functional.all_reduce(x, op=ReduceOp.SUM, group=group)` as written; its "
        "backward all-reduces the cotangents (pytorch #58005 was a wrong gradient here).",
    ),
    VariantSpec(
        "ar_nn_all_reduce_avg",
        "torch.distributed.nn.functional:all_reduce",
        all_reduce_claim(grad="mean", op="mean"),
        "The same with `op=ReduceOp.AVG`: backward all-reduces the cotangents with AVG.",
    ),
    VariantSpec(
        "ar_funcol_all_reduce",
        "torch.distributed._functional_collectives:all_reduce",
        all_reduce_claim(grad="sum"),
        "`_functional_collectives.all_reduce(x, 'sum', group)` as written; differentiable through funcol's "
        "autograd registration.",
        race=FUNCOL_VIEW_RACE,
    ),
    VariantSpec(
        "ar_funcol_all_reduce_avg",
        "torch.distributed._functional_collectives:all_reduce",
        all_reduce_claim(grad="mean", op="mean"),
        "The same with `'avg'`: its backward raises \"all_reduce backward only supports 'sum' reduction\" "
        "(pytorch #190007; `docs/findings/funcol_all_reduce_avg_backward.py`).",
    ),
    VariantSpec(
        "ar_megatron_reduce_from_region",
        "harness.variants.megatron:reduce_from_tensor_model_parallel_region",
        all_reduce_claim(grad="identity"),
        "Megatron-LM `reduce_from_tensor_model_parallel_region` (`_reduce`: `all_reduce(input_.contiguous())`, "
        "then `return input_`; backward the identity).",
    ),
    VariantSpec(
        "ar_flash_attn",
        "harness.variants.all_reduces:AllReduceFunc",
        all_reduce_claim(grad="identity"),
        "flash-attention `all_reduce = AllReduceFunc.apply` (`flash_attn/utils/distributed.py`): "
        "`all_reduce_raw` on `input_.contiguous()`, identity backward (flash-attention #1244).",
    ),
    VariantSpec(
        "split_ours",
        "harness.ragged:split",
        claim(ragged=True, dims="any", grad="adjoint", collective="split"),
        "`harness.ragged.split(x, dim, split_sizes)`: this rank's slot of the replicated x, a fresh tensor; "
        "backward gathers the cotangents (the adjoint). Ragged slots, any dim.",
    ),
    VariantSpec(
        "split_megatron_tensor_parallel",
        "harness.variants.megatron:scatter_to_tensor_model_parallel_region",
        claim(ragged=False, dims="-1", grad="adjoint", collective="split"),
        "Megatron-LM `scatter_to_tensor_model_parallel_region` (`_split_along_last_dim`, backward "
        "`_gather_along_last_dim`): equal pieces of the last dim.",
    ),
    VariantSpec(
        "split_megatron_sequence_parallel",
        "harness.variants.megatron:scatter_to_sequence_parallel_region",
        claim(ragged=False, dims="0", grad="adjoint", collective="split"),
        "Megatron-LM `scatter_to_sequence_parallel_region` (`_split_along_first_dim`, backward "
        "`_gather_along_first_dim`): equal pieces of dim 0.",
    ),
    VariantSpec(
        "copy_ours",
        "harness.ragged:copy_to_region",
        claim(ragged=False, dims="any", grad="sum", collective="copy"),
        "`harness.ragged.copy_to_region(x)`: a copy forward, the all-reduce of the cotangents backward.",
    ),
    VariantSpec(
        "copy_megatron",
        "harness.variants.megatron:copy_to_tensor_model_parallel_region",
        claim(ragged=False, dims="any", grad="sum", collective="copy"),
        "Megatron-LM `copy_to_tensor_model_parallel_region`: `return input_` forward, `_reduce(grad_output)` "
        "backward (`all_reduce(grad.contiguous())`, then `return grad`).",
    ),
    VariantSpec(
        "bcast_ours",
        "harness.ragged:broadcast",
        claim(ragged=False, dims="any", grad="sum", collective="broadcast"),
        "`harness.ragged.broadcast(x, src, group)`: a dense copy broadcast from `src` (a global rank); backward "
        "sums the cotangents to the source, zero elsewhere.",
    ),
    VariantSpec(
        "bcast_c10d",
        "torch.distributed:broadcast",
        claim(ragged=False, dims="any", grad="none", collective="broadcast"),
        "`dist.broadcast(x, src, group=group)` called as written: no result, x written in place on every rank "
        "but the source; not differentiable.",
    ),
    VariantSpec(
        "bcast_nn",
        "torch.distributed.nn.functional:broadcast",
        claim(ragged=False, dims="any", grad="sum", collective="broadcast"),
        "`torch.distributed.nn.functional.broadcast(x, src, group)` as written: backward `_Reduce` of the "
        "cotangents to `src`, zeroed where `src != dist.get_rank(group)`.",
    ),
    VariantSpec(
        "bcast_funcol",
        "torch.distributed._functional_collectives:broadcast",
        claim(ragged=False, dims="any", grad="none", collective="broadcast").with_(src_rank="group"),
        "`_functional_collectives.broadcast(x, src, group)` as written, its `src` a rank in the group.",
    ),
    VariantSpec(
        "scatter_ours",
        "harness.ragged:scatter",
        claim(ragged=True, dims="any", grad="adjoint", collective="scatter"),
        "`harness.ragged.scatter(x, dim, split_sizes, src, group)`: the source's x broadcast as a dense copy, "
        "this rank's slot kept; backward gathers the cotangents to the source, zero elsewhere.",
    ),
    VariantSpec(
        "scatter_nn",
        "torch.distributed.nn.functional:scatter",
        claim(ragged=False, dims="0", grad="adjoint", collective="scatter"),
        "`torch.distributed.nn.functional.scatter(tensors, src, group)` as written: `dist.scatter` into "
        "`zeros_like(tensors[0])`, the source told by `dist.get_rank(group) == src`; backward `_Gather`.",
    ),
    VariantSpec(
        "reduce_ours",
        "harness.ragged:reduce",
        claim(ragged=False, dims="any", grad="adjoint", collective="reduce"),
        "`harness.ragged.reduce(x, dst, op, group)`: `dist.reduce` of a dense copy; backward broadcasts the "
        "destination's cotangent.",
    ),
    VariantSpec(
        "reduce_c10d",
        "torch.distributed:reduce",
        claim(ragged=False, dims="any", grad="none", collective="reduce"),
        "`dist.reduce(x, dst, op, group=group)` called as written: no result, x written in place; only the "
        "destination's is judged.",
    ),
    VariantSpec(
        "reduce_nn",
        "torch.distributed.nn.functional:reduce",
        claim(ragged=False, dims="any", grad="adjoint", collective="reduce"),
        "`torch.distributed.nn.functional.reduce(x, dst, op, group)` as written: `dist.reduce` of "
        "`x.clone()`; backward `_Broadcast` of the cotangent from `dst`.",
    ),
    VariantSpec(
        "gather_to_ours",
        "harness.ragged:gather_to",
        claim(ragged=True, dims="any", grad="adjoint", collective="gather-to"),
        "`harness.ragged.gather_to(x, dim, dst, group)`: our ragged all-gather (every rank gets it; only "
        "`dst`'s is judged); backward broadcasts the destination's cotangent and keeps this rank's slot.",
    ),
    VariantSpec(
        "gather_to_nn",
        "torch.distributed.nn.functional:gather",
        claim(ragged=False, dims="0", grad="adjoint", output="list", collective="gather-to"),
        "`torch.distributed.nn.functional.gather(x, dst, group)` as written: a tuple of one tensor per rank "
        "(zeros off the destination), the destination told by `dist.get_rank(group) == dst`; backward `_Scatter`.",
    ),
    VariantSpec(
        "gather_to_object",
        "harness.variants.torch_paths:gather_object_list",
        claim(ragged=True, dims="any", grad="none", output="list", collective="gather-to"),
        "`dist.gather_object(x, out, dst, group)`: 'Gathers picklable objects from the whole group in a single "
        "process' (its docstring); on `dst` the list of every rank's tensor, any shapes, `None` elsewhere; no "
        "gradient. Adapter: the destination-allocated output list.",
    ),
)
