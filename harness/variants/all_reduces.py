"""flash-attention's all-reduce, as written: ``flash_attn/utils/distributed.py``'s ``all_reduce_raw`` and
``AllReduceFunc`` (Dao-AILab/flash-attention; the stored copies of that file at c6ecd40 and 226a1b7 predate
the block, read here from later copies of it).  Its users asked whether the identity backward is a bug
(flash-attention #1244): it is right where the ranks' losses are one loss (the ``identity`` contract),
wrong where every rank's loss uses its copy (``sum``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.distributed import ProcessGroup


def all_reduce_raw(input_: Tensor, process_group: ProcessGroup, async_op: bool = False) -> tuple[Tensor, Any]:
    """As written: a contiguous ``input_`` is the caller's tensor, and the all-reduce writes it."""
    input_ = input_.contiguous()
    handle = torch.distributed.all_reduce(input_, group=process_group, async_op=async_op)
    return input_, handle


class AllReduceFunc(torch.autograd.Function):
    """Gather the input from sequence parallel region and concatenate."""

    @staticmethod
    def forward(ctx: Any, input_: Tensor, process_group: ProcessGroup) -> Tensor:
        ctx.process_group = process_group
        output, _ = all_reduce_raw(input_, process_group)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor, None]:
        return grad_output, None


# Supports autograd, but does not support async
all_reduce = AllReduceFunc.apply
