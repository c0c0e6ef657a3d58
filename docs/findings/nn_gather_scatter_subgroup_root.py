"""torch bug: `torch.distributed.nn.functional.gather(x, dst, group)` and `.scatter(tensors, src, group)`
decide which rank is the root by comparing `dist.get_rank(group)` (a rank in the group) with `dst`/`src`,
then pass the same number to `dist.gather`/`dist.scatter`, which read it as a global rank.  On a
subgroup whose first member is not global rank 0 no value works: given the global rank (c10d's
convention) the root is not recognised and raises "gather_list must be specified on destination rank";
given the group rank, c10d finds no such rank in the group.  The same comparison is what
`torch.distributed.nn.functional.broadcast`'s backward gets wrong (docs/neighbours.md).  Checked as
the catalogue rows `gather_to_nn` and `scatter_nn`, this is a finding on a case with groups.
Run: timeout 120 python docs/findings/nn_gather_scatter_subgroup_root.py   (exit 1 = the bug)
"""

import sys

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as nnf
from _ranks import launch, reported


def on_rank(rank, world):
    group = dist.new_group([1])  # every rank joins new_group; only rank 1 is in it
    if rank != 1:
        return "not in the group"
    said = []
    for name, root in (("the global rank", 1), ("the group rank", 0)):
        x = torch.full((2,), 7.0)
        try:
            nnf.gather(x, dst=root, group=group)
            said.append(f"gather, dst={root} ({name}): returned")
        except (ValueError, RuntimeError) as exc:
            said.append(f"gather, dst={root} ({name}): {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
        try:
            nnf.scatter([x], src=root, group=group)
            said.append(f"scatter, src={root} ({name}): returned")
        except (ValueError, RuntimeError) as exc:
            said.append(f"scatter, src={root} ({name}): {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
    return "\n    ".join(said)


def main():
    print(f"torch {torch.__version__}: nn.functional gather/scatter on the subgroup {{1}} of a world of 2")
    raised = 0
    for rank, got in reported(launch(on_rank, 2)):
        print(f"  rank {rank}: {got}")
        raised += got.count("Error")
    print(f"\n{raised} of 4 calls RAISED" if raised else "\nevery call returned")
    return 1 if raised == 4 else 0


if __name__ == "__main__":
    sys.exit(main())
