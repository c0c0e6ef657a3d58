"""A gather that returns ``(gathered, sizes)``, lucidrains-style (output convention ``first``).

Checked as written; ranks may hold different lengths along ``dim``::

    python -m harness check examples/with_sizes.py:gather_with_sizes --grad sum
"""

import torch
import torch.distributed as dist

from harness.ragged import all_gather_ragged


def gather_with_sizes(x, dim=0):
    """Concatenate every rank's ``x`` along ``dim``, and say how long each rank's piece was."""
    sizes = [None] * dist.get_world_size()
    dist.all_gather_object(sizes, x.shape[dim])
    return all_gather_ragged(x, dim), torch.tensor(sizes)
