"""A ragged gather with a classic bug: padding is removed by value, so genuine zeros vanish.

Every rank pads its tensor with zeros to the longest length, all_gathers, and keeps the rows
that are not all zero: right until the data itself holds a zero row.  The harness finds it::

    python -m harness check examples/buggy.py:gather --max-examples 50
"""

import math

import torch
import torch.distributed as dist


def gather(x, dim=0):
    """Concatenate every rank's ``x`` along ``dim`` (meant to, at least)."""
    front = x.movedim(dim, 0)
    length = torch.tensor([front.shape[0]])
    lengths = [torch.zeros_like(length) for _ in range(dist.get_world_size())]
    dist.all_gather(lengths, length)
    padded = front.new_zeros((int(max(lengths)), *front.shape[1:]))
    padded[: front.shape[0]] = front
    pieces = [torch.empty_like(padded) for _ in lengths]
    dist.all_gather(pieces, padded)
    rows = torch.cat(pieces)
    keep = rows.reshape(rows.shape[0], math.prod(rows.shape[1:])).ne(0).any(dim=1)
    return rows[keep].movedim(0, dim)
