"""MoCo's ``concat_all_gather(tensor)``: takes only ``x``, gathers along dim 0, no gradient.

Checked as written (a target without a dim parameter is checked along the dim the probe sees it
gather along: here 0)::

    python -m harness check examples/x_only.py:concat_all_gather --no-ragged
"""

import torch
import torch.distributed as dist


@torch.no_grad()
def concat_all_gather(tensor):
    """Equal-shaped tensors from every rank, concatenated along dim 0."""
    tensors_gather = [torch.ones_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(tensors_gather, tensor.contiguous(), async_op=False)
    return torch.cat(tensors_gather, dim=0)
