"""A gather that takes ``group=``: checked on subgroups, where group rank != global rank.

Checked as written; ``--groups`` draws subgroup layouts and passes each rank its group::

    python -m harness check examples/with_group.py:gather --groups --grad sum
"""

from harness.ragged import all_gather_ragged


def gather(x, dim=0, group=None):
    """Concatenate the ``x`` of every rank of ``group`` (group-rank order) along ``dim``."""
    return all_gather_ragged(x, dim, group=group)
