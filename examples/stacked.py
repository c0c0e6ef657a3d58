"""A Lightning-style ``all_gather``: one ``(W, *x.shape)`` tensor (output convention ``stack``).

Checked as written (a stack needs equal shapes; 0-d inputs are drawn too)::

    python -m harness check examples/stacked.py:all_gather --output stack
"""

import torch.distributed as dist


def all_gather(x, group=None):
    """Every rank's ``x`` stacked along a new first dim, in rank order; no gradient.

    gloo gathers into a flat buffer only (a ``(W, *x.shape)`` output buffer is refused:
    "invalid tensor size"), so the stack is a view of the flat result.
    """
    world = dist.get_world_size(group)
    out = x.new_empty(world * x.numel())
    dist.all_gather_into_tensor(out, x.contiguous().reshape(-1), group=group)
    return out.view(world, *x.shape)
