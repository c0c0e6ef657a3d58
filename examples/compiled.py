"""Compiled code: a gather written compiled, the same gather eager (for ``--compile``), and a bug
only the compiled code has.

Checked as written (a compile is never taken for a hang; the probe reads the dim)::

    python -m harness check examples/compiled.py:compiled_funcol_gather --no-ragged --dtypes float32 --world-sizes 1-2 --max-examples 10

An eager target through torch.compile (``--compile``): ``fast_path_when_compiled`` is right eagerly
and wrong compiled, so its finding is named compile-only::

    python -m harness check examples/compiled.py:fast_path_when_compiled --no-ragged --compile --dtypes float32 --world-sizes 2-2 --max-examples 20
"""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def funcol_gather(x, dim, group=None):
    """The functional all_gather along any dim, eager: check it with --compile to check it compiled."""
    return funcol.all_gather_tensor(x.contiguous(), dim, group if group is not None else dist.group.WORLD)


@torch.compile
def _compiled_gather(x, group):
    return funcol.all_gather_tensor(x, 0, group)


def compiled_funcol_gather(x, group=None):
    """A torch.compile'd functional all_gather along dim 0, as compiled tensor-parallel code writes it."""
    return _compiled_gather(x.contiguous(), group if group is not None else dist.group.WORLD)


def fast_path_when_compiled(x, dim):
    """Right when called eagerly; under torch.compile a "fast path" lists the ranks in reverse."""
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    if torch.compiler.is_compiling():
        pieces = pieces[::-1]
    return torch.cat(pieces, dim)
