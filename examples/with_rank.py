"""The helper training scripts carry: ``all_gather_features(features, rank, world_size)``.

It gathers without autograd and puts this rank's own features (with their graph) back
into slot ``rank``: the local gradient.  The harness passes ``rank`` and ``world_size`` by
name, those of the group it passes (``--groups``: each rank's subgroup)::

    python -m harness check examples/with_rank.py:all_gather_features --no-ragged --grad local --groups
"""

import torch
import torch.distributed as dist


def all_gather_features(features, rank, world_size, group=None):
    """Every rank's ``features`` concatenated along dim 0; the gradient reaches this rank's own slot only."""
    with torch.no_grad():
        gathered = [torch.zeros_like(features) for _ in range(world_size)]
        dist.all_gather(gathered, features.contiguous(), group=group)
    gathered[rank] = features
    return torch.cat(gathered, dim=0)
