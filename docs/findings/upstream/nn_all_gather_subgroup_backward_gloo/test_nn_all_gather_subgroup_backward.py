# Owner(s): ["oncall: distributed"]
"""torch.distributed.nn.functional.all_gather's backward in a subgroup that excludes global rank 0.

On gloo the backward's _AlltoAll called dist.scatter(out, to_send, i, group=group) with the group
rank i as the (global) src: "ValueError: Global rank 0 is not part of group". Suggested home
upstream: TestDistributedNNFunctionsGloo in test/distributed/test_c10d_spawn_gloo.py (CPU tensors:
no GPU needed), beside the subgroup test of the broadcast fix.

Run: python test_nn_all_gather_subgroup_backward.py
"""

import torch
import torch.distributed as dist
import torch.distributed.nn
from torch.testing._internal.common_distributed import MultiProcessTestCase, requires_gloo
from torch.testing._internal.common_utils import run_tests


class TestAllGatherSubgroupBackwardGloo(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @property
    def world_size(self):
        return 3

    def _init_process_group(self):
        store = dist.FileStore(self.file_name, self.world_size)
        dist.init_process_group(
            "gloo", store=store, rank=self.rank, world_size=self.world_size
        )

    @requires_gloo()
    def test_all_gather_backward_subgroup_without_rank_0(self):
        self._init_process_group()
        members = [1, 2]  # group ranks 0, 1 are global ranks 1, 2
        subgroup = dist.new_group(members)
        if self.rank not in members:
            return
        me = members.index(self.rank)
        x = (torch.arange(2.0) + 10 * self.rank).requires_grad_()
        y = torch.cat(torch.distributed.nn.all_gather(x, group=subgroup))
        self.assertEqual(y, torch.cat([torch.arange(2.0) + 10 * r for r in members]))

        # backward: a reduce-scatter of every member's (different) cotangent
        cotangents = [torch.arange(4.0) + 100 * r for r in members]
        y.backward(cotangents[me])
        self.assertEqual(x.grad, sum(c[2 * me : 2 * me + 2] for c in cotangents))


if __name__ == "__main__":
    run_tests()
