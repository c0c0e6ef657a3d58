"""Planted gathers written in every calling convention: buggy ones the harness must catch
without glue, and targets that fit no convention (the probe's misfit table).

The correct counterparts are the README's examples (``examples/``); each bug here is one
departure from the way published code of that convention is written.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

from harness.ragged import all_gather_ragged

# -- one bug per output convention ----------------------------------------------------------------


class ReversedGatherLayer(torch.autograd.Function):
    """list: a GatherLayer whose tuple lists the ranks in reverse order."""

    @staticmethod
    def forward(ctx, x):
        gathered = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, x.contiguous())
        return tuple(reversed(gathered))

    @staticmethod
    def backward(ctx, *grads):
        return grads[dist.get_world_size() - 1 - dist.get_rank()].clone()


def unstacked_on_one_rank(x):
    """stack: Lightning's early return: with one rank the input comes back without the stack dim."""
    if dist.get_world_size() == 1:
        return x
    out = x.new_empty(dist.get_world_size() * x.numel())
    dist.all_gather_into_tensor(out, x.contiguous().reshape(-1))
    return out.view(dist.get_world_size(), *x.shape)


def sizes_right_data_short(x, dim=0):
    """first: the sizes are right, but the gathered tensor drops the last rank's piece."""
    sizes = [None] * dist.get_world_size()
    dist.all_gather_object(sizes, x.shape[dim])
    gathered = all_gather_ragged(x, dim)
    return gathered.narrow(dim, 0, gathered.shape[dim] - sizes[-1]), torch.tensor(sizes)


@torch.no_grad()
def aliased_buffers(tensor):
    """x-only: ``[torch.zeros_like(tensor)] * W`` is one buffer W times: every piece is the last rank's."""
    tensors_gather = [torch.zeros_like(tensor)] * dist.get_world_size()
    dist.all_gather(tensors_gather, tensor.contiguous())
    return torch.cat(tensors_gather, dim=0)


class AllGatherWithGrad(torch.autograd.Function):
    """The common "all_gather with grad" Function (Lightning's ``_AllGather`` in lightning_lite and
    fabric; sentence-transformers-style contrastive code): stack over ``group``, backward takes
    ``grad_output[dist.get_rank()]`` -- the *global* rank, written for the world group and wrong
    whenever it differs from the rank within the group (out of range on a small subgroup)."""

    @staticmethod
    def forward(ctx, tensor, group):
        ctx.group = group
        gathered = [torch.zeros_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, tensor.contiguous(), group=group)
        return torch.stack(gathered)

    @staticmethod
    def backward(ctx, grad_output):
        grad_output = grad_output.contiguous()
        dist.all_reduce(grad_output, group=ctx.group)
        return grad_output[dist.get_rank()], None


def global_rank_on_subgroup(x, group=None):
    """group=: the Lightning lineage's subgroup bug (checked with ``--groups``)."""
    return AllGatherWithGrad.apply(x, group if group is not None else dist.group.WORLD)


def ignores_group(x, dim=0, group=None):
    """group=: takes a group and gathers over the whole world anyway."""
    return all_gather_ragged(x, dim)


def name_error_at_two_ranks(x, dim):
    """A published gather that raises inside its own code once W >= 2 (lucidrains' musiclm)."""
    if dist.get_world_size() > 1:
        return undefined_helper(x, dim)  # noqa: F821  (the published bug)
    return all_gather_ragged(x, dim)


# -- targets no convention fits -----------------------------------------------------------------


def returns_dict(x, dim):
    return {"gathered": all_gather_ragged(x, dim)}


def per_rank_list(x, dim):
    """A correct ``list`` gather (equal shapes): misread only when declared ``--output tensor``."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    return pieces


class NotAFunction:
    """A class the harness cannot construct (an nn.Module class needing arguments, say)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim


NOT_CALLABLE = 42


def no_group(x, dim):
    return all_gather_ragged(x, dim)


# -- called as its authors' callers call it: an optional group, rank and size, fixed arguments ------


class AllGatherGrad(torch.autograd.Function):
    """Lightning's ``AllGatherGrad`` as of Lightning PR 5012 (``forward(ctx, tensor, group=group.WORLD)``):
    its backward returns ONE gradient for its TWO inputs, so every backward of
    ``AllGatherGrad.apply(tensor, group)`` -- the call Lightning itself makes -- raises
    "returned an incorrect number of gradients (expected 2, got 1)" (Lightning#6624), while
    ``AllGatherGrad.apply(tensor)`` works.  (``.contiguous()`` added: gloo's requirement, not the bug.)"""

    @staticmethod
    def forward(ctx, tensor, group=dist.group.WORLD):
        ctx.group = group
        gathered_tensor = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered_tensor, tensor.contiguous(), group=group)
        return torch.stack(gathered_tensor, dim=0)

    @staticmethod
    def backward(ctx, *grad_output):
        grad_output = torch.cat(grad_output)
        dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, async_op=False, group=ctx.group)
        return grad_output[dist.get_rank()]


class AllGatherGradFixed(AllGatherGrad):
    """The fix Lightning shipped: one gradient per input (``None`` for the group)."""

    @staticmethod
    def backward(ctx, *grad_output):
        grad_output = torch.cat(grad_output)
        dist.all_reduce(grad_output, op=dist.ReduceOp.SUM, async_op=False, group=ctx.group)
        return grad_output[dist.get_rank()], None


def reads_by_its_group(x, group=None):
    """Per-rank pieces without a group, their concatenation with one: no single reading fits both calls."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(pieces, x.contiguous(), group=group)
    return pieces if group is None else torch.cat(pieces)


def gather_by_args(*args, **kwargs):
    """A decorator's wrapper without ``functools.wraps`` around ``gather(x, group=None)``: its
    signature names nothing, so the harness infers ``f(x, dim)`` and the dim lands in ``group``."""
    return _gather_x_group(*args, **kwargs)


def _gather_x_group(x, group=None):
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(pieces, x.contiguous(), group=group)
    return torch.cat(pieces)


def gather_dim_by_args(*args):
    """The same wrapper around a ``gather(x, dim)``: the inferred ``f(x, dim)`` is right."""
    return all_gather_ragged(*args)


# -- published gathers whose second parameter is no dim (each exits 2, naming it) -------------------


class CLIP4ClipAllGather(torch.autograd.Function):
    """CLIP4Clip ``modules/until_module.py``: ``AllGather.apply(tensor, args)``, ``args`` a config object."""

    @staticmethod
    def forward(ctx, tensor, args):
        output = [torch.empty_like(tensor) for _ in range(args.world_size)]
        dist.all_gather(output, tensor)
        ctx.rank = args.rank
        ctx.batch_size = tensor.shape[0]
        return torch.cat(output, dim=0)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output[ctx.batch_size * ctx.rank: ctx.batch_size * (ctx.rank + 1)], None


def gather_from_model_parallel_region(input, natoms):
    """fairchem ``gp_utils``: gather graph-parallel node features, ``natoms`` the total node count."""
    world = dist.get_world_size()
    pieces = [torch.empty_like(input) for _ in range(world)]
    dist.all_gather(pieces, input.contiguous())
    return torch.cat(pieces)[:natoms]


def gather_features(image_features, text_features, local_loss=False, gather_with_grad=False, rank=0,
                    world_size=1, use_horovod=False):
    """open_clip ``loss.py``: two tensors in, two gathered tensors out."""
    gathered_image = [torch.zeros_like(image_features) for _ in range(world_size)]
    gathered_text = [torch.zeros_like(text_features) for _ in range(world_size)]
    dist.all_gather(gathered_image, image_features)
    dist.all_gather(gathered_text, text_features)
    if not local_loss:
        gathered_image[rank] = image_features
        gathered_text[rank] = text_features
    return torch.cat(gathered_image, dim=0), torch.cat(gathered_text, dim=0)


class VlkitAllGather(torch.autograd.Function):
    """vlkit ``ops/distributed.py``: ``AllGather.apply(tensor_list, tensor)``, the output list first."""

    @staticmethod
    def forward(ctx, tensor_list, tensor):
        dist.all_gather(tensor_list, tensor)
        return tuple(tensor_list)

    @staticmethod
    def backward(ctx, *grad_list):
        grad_list = list(grad_list)
        rank = dist.get_rank()
        dist_ops = [dist.reduce(grad_list[i], i, async_op=True) for i in range(dist.get_world_size())]
        for op in dist_ops:
            op.wait()
        return None, grad_list[rank]


def all_gather_anchor_positive_pairs(anchors: torch.Tensor, positives: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DeCLUTR ``common/util.py``: anchors and positives gathered together."""
    anchors_list = [torch.ones_like(anchors) for _ in range(dist.get_world_size())]
    positives_list = [torch.ones_like(positives) for _ in range(dist.get_world_size())]
    dist.all_gather(anchors_list, anchors)
    dist.all_gather(positives_list, positives)
    anchors_list[dist.get_rank()] = anchors
    positives_list[dist.get_rank()] = positives
    return torch.cat(anchors_list), torch.cat(positives_list)


def all_gather(embeddings, labels):
    """pytorch-metric-learning ``utils/distributed.py``: embeddings and their labels gathered together."""
    world_size, rank = dist.get_world_size(), dist.get_rank()
    embeddings_list = [torch.ones_like(embeddings) for _ in range(world_size)]
    labels_list = [torch.ones_like(labels) for _ in range(world_size)]
    dist.all_gather(embeddings_list, embeddings.contiguous())
    dist.all_gather(labels_list, labels.contiguous())
    embeddings_list[rank] = embeddings
    labels_list[rank] = labels
    return torch.cat(embeddings_list), torch.cat(labels_list)


# -- targets that take no dim: the probe reads which dim they work along ---------------------------


def _cat_of_every_rank(x, dim, group):
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(pieces, x.contiguous(), group=group)
    return torch.cat(pieces, dim)


def gather_last_dim(x, group=None):
    """A tensor-parallel gather: always the last dim (-1 by name: dim 2 of a 3-d input)."""
    return _cat_of_every_rank(x, -1, group)


def gather_dim_1(x, group=None):
    """Always dim 1: a 1-d input raises, and the probe tries inputs of more dims."""
    return _cat_of_every_rank(x, 1, group)


def gather_last_dim_of_3d_only(x, group=None):
    """Accepts 3-d inputs only: no dim fits 2-d and 4-d inputs too, so the probe asks for --dims and --ndims."""
    if x.dim() != 3:
        raise ValueError(f"expected a 3-d [s, b, h] activation, got {x.dim()}-d")
    return _cat_of_every_rank(x, -1, group)


def gather_last_dim_reversed(x, group=None):
    """Ranks in reverse order along the last dim: the dim still shows in its shapes, the values are wrong."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(pieces, x.contiguous(), group=group)
    return torch.cat(pieces[::-1], -1)


def hangs_on_a_2d_input(x, group=None):
    """Rank 1 never returns on a 2-d input: the dim probe says so once, in the case's timeout."""
    if x.dim() == 2 and dist.get_rank() == 1:
        threading.Event().wait()
    return _cat_of_every_rank(x, 0, group)


# -- compiled code ---------------------------------------------------------------------------------


def compiles_forever(x, dim):
    """Inside torch.compile (by dynamo's own callbacks) and never out: a compiler slower than any timeout."""
    from torch._dynamo.callback import callback_handler

    callback_handler.run_start_callbacks(None)
    threading.Event().wait()
