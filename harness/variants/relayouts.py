"""Sequence parallelism's all-to-all: re-layouts (scatter one dim, gather the pieces along another).

DeepSpeed-Ulysses, yunchang (USP) and ColossalAI (and their kin in xDiT, FastVideo and others)
trade a sequence shard for a head shard before attention and back after it.  Each function
here is called as its authors' callers call it, with their parameter names (``scatter_idx`` /
``gather_idx``, ``scatter_dim`` / ``gather_dim``) and the group first where they take it first;
the harness binds both dims by name (``--collective all-to-all``).  The code is written here to
do what the published code does, step for step (the same reshapes, transposes and collectives,
so the same results and the same failures), not copied: the docstrings name the source.

========================= ======================================================= ====== =============== =======
function                  published form                                          ragged dims            grad
========================= ======================================================= ====== =============== =======
DeepSpeedSeqAllToAll      DeepSpeed ``_SeqAllToAll.apply(group, input, s, g)``    no     2 -> 0 (s,b,h,d) adjoint
YunchangSeqAllToAll4D     yunchang ``SeqAllToAll4D.apply(group, input, s, g)``    no     2 -> 1 (b,s,h,d) adjoint
colossalai_all_to_all     ColossalAI ``all_to_all_comm(input_, process_group,``   no     any             adjoint
                          ``scatter_dim, gather_dim)``
========================= ======================================================= ====== =============== =======
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def _deepspeed_exchange(x: torch.Tensor, scatter_idx: int, gather_idx: int, group: Any) -> torch.Tensor:
    """DeepSpeed's ``single_all_to_all`` (``deepspeed/sequence/layer.py``, the form before its
    ``batch_dim_idx`` parameter): a scatter dim below 2 is cut by one reshape (the leading dims
    taken as W pieces), a later one by a reshape that folds every dim before it into one and a
    transpose; one ``all_to_all_single``; the pieces received, transposed back when the scatter dim
    was below 2, are reshaped into the gather dim.  Laid out (sequence, batch, heads, dim) and
    scattering heads into the sequence (2 -> 0), the pieces land where they should; going back
    (0 -> 2), the transpose leaves the world between sequence and batch, and the final reshape
    reads it as part of the batch: right for a batch of one only."""
    world = dist.get_world_size(group)
    shape = list(x.shape)
    shape[scatter_idx] //= world
    if scatter_idx < 2:
        send = x.reshape([world, shape[scatter_idx], *shape[scatter_idx + 1:]]).contiguous()
    else:
        send = x.reshape([-1, world, shape[scatter_idx], *shape[scatter_idx + 1:]]).transpose(0, 1).contiguous()
    received = torch.empty_like(send)
    dist.all_to_all_single(received, send, group=group)
    if scatter_idx < 2:
        received = received.transpose(0, 1).contiguous()
    gathered = [*shape[:gather_idx], shape[gather_idx] * world, *shape[gather_idx + 1:]]
    return received.reshape(gathered).contiguous()


class DeepSpeedSeqAllToAll(torch.autograd.Function):
    """DeepSpeed-Ulysses' ``_SeqAllToAll`` (``DistributedAttention`` calls it with ``scatter_idx=2,
    gather_idx=0`` on (sequence, batch, heads, dim) inputs, then with the two swapped on the
    attention's output); the backward is the same function with the dims swapped."""

    @staticmethod
    def forward(ctx: Any, group: Any, input: torch.Tensor, scatter_idx: int, gather_idx: int) -> torch.Tensor:
        ctx.group, ctx.scatter_idx, ctx.gather_idx = group, scatter_idx, gather_idx
        return _deepspeed_exchange(input, scatter_idx, gather_idx, group)

    @staticmethod
    def backward(ctx: Any, *grad_output: torch.Tensor) -> tuple[None, torch.Tensor, None, None]:
        return None, DeepSpeedSeqAllToAll.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx), None, None


def _yunchang_exchange(x: torch.Tensor, scatter_idx: int, gather_idx: int, group: Any) -> torch.Tensor:
    """yunchang's ``all_to_all_4D`` (``yunchang/comm/all_to_all.py``): 4-d (batch, sequence, heads,
    dim) inputs only; heads for sequence (2 -> 1): (b, s/W, W, h/W, d) with the world moved first,
    one ``all_to_all_single``, then (s, b, h/W, d) transposed to (b, s, h/W, d); sequence for heads
    (1 -> 2) the reverse way.  Any other pair of dims raises, as the published function does."""
    assert x.dim() == 4, f"input must be 4D tensor, got {x.dim()} and shape {x.shape}"
    world = dist.get_world_size(group)
    if (scatter_idx, gather_idx) == (2, 1):
        batch, shard, heads, size = x.shape
        send = x.reshape(batch, shard, world, heads // world, size).transpose(0, 2).contiguous()
        received = torch.empty_like(send)
        dist.all_to_all_single(received, send, group=group)
        received = received.reshape(shard * world, batch, heads // world, size)
        return received.transpose(0, 1).contiguous().reshape(batch, shard * world, heads // world, size)
    if (scatter_idx, gather_idx) == (1, 2):
        batch, length, shard_heads, size = x.shape
        shard = length // world
        send = x.reshape(batch, world, shard, shard_heads, size).transpose(0, 3).transpose(0, 1).contiguous()
        send = send.reshape(world, shard_heads, shard, batch, size)
        received = torch.empty_like(send)
        dist.all_to_all_single(received, send, group=group)
        received = received.reshape(shard_heads * world, shard, batch, size)
        return received.transpose(0, 2).contiguous().reshape(batch, shard, shard_heads * world, size)
    raise RuntimeError("scatter_idx must be 1 or 2 and gather_idx must be 1 or 2")


class YunchangSeqAllToAll4D(torch.autograd.Function):
    """yunchang's ``SeqAllToAll4D`` (Ulysses attention in USP, xDiT); the backward swaps the dims."""

    @staticmethod
    def forward(ctx: Any, group: Any, input: torch.Tensor, scatter_idx: int, gather_idx: int) -> torch.Tensor:
        ctx.group, ctx.scatter_idx, ctx.gather_idx = group, scatter_idx, gather_idx
        return _yunchang_exchange(input, scatter_idx, gather_idx, group)

    @staticmethod
    def backward(ctx: Any, *grad_output: torch.Tensor) -> tuple[None, torch.Tensor, None, None]:
        return None, YunchangSeqAllToAll4D.apply(ctx.group, *grad_output, ctx.gather_idx, ctx.scatter_idx), None, None


def _colossalai_exchange(x: torch.Tensor, group: Any, scatter_dim: int, gather_dim: int) -> torch.Tensor:
    """ColossalAI's ``_all_to_all`` (``colossalai/shardformer/layer/_operation.py``): x cut by
    ``torch.tensor_split`` into W pieces along the scatter dim, each piece received into a tensor
    shaped like this rank's first piece, ``dist.all_to_all`` of the lists, the pieces concatenated
    along the gather dim."""
    world = dist.get_world_size(group)
    pieces = [piece.contiguous() for piece in torch.tensor_split(x, world, scatter_dim)]
    received = [torch.empty_like(pieces[0]) for _ in range(world)]
    dist.all_to_all(received, pieces, group=group)
    return torch.cat(received, dim=gather_dim).contiguous()


class _ColossalAIAllToAll(torch.autograd.Function):
    """ColossalAI's ``_AllToAll``: the backward is the exchange with the dims swapped."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor, process_group: Any, scatter_dim: int,
                gather_dim: int) -> torch.Tensor:
        ctx.process_group, ctx.scatter_dim, ctx.gather_dim = process_group, scatter_dim, gather_dim
        return _colossalai_exchange(input_, process_group, scatter_dim, gather_dim)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        return _colossalai_exchange(grad_output, ctx.process_group, ctx.gather_dim, ctx.scatter_dim), None, None, None


def colossalai_all_to_all(input_: torch.Tensor, process_group: Any = None, scatter_dim: int = 2,
                          gather_dim: int = 1) -> torch.Tensor:
    """ColossalAI's ``all_to_all_comm``, its signature as published."""
    return _ColossalAIAllToAll.apply(input_, process_group, scatter_dim, gather_dim)
