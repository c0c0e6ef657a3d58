# Owner(s): ["oncall: distributed"]
"""torch.distributed.nn.functional.all_gather's backward with non-contiguous (permuted) cotangents.

On gloo the backward allocated its receive buffers with torch.empty_like(cotangent), keeping a
permuted cotangent's strides, and dist.scatter wrote into them as if contiguous: the gradient came
back transposed (2-D) or scrambled. Suggested home upstream: TestDistributedNNFunctionsGloo in
test/distributed/test_c10d_spawn_gloo.py (CPU tensors: no GPU needed).

Run: python test_nn_all_gather_noncontig_cotangent.py
"""

import torch
import torch.distributed as dist
import torch.distributed.nn
from torch.testing._internal.common_distributed import MultiProcessTestCase, requires_gloo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)


def _cotangent(rank, part, shape):
    # distinct values per element, per rank and per gathered part: exact sums
    n = torch.tensor(shape).prod().item()
    return torch.arange(n, dtype=torch.float64).reshape(shape) + 100 * rank + 1000 * part


@instantiate_parametrized_tests
class TestAllGatherNonContiguousCotangentGloo(MultiProcessTestCase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @property
    def world_size(self):
        return 2

    def _init_process_group(self):
        store = dist.FileStore(self.file_name, self.world_size)
        dist.init_process_group(
            "gloo", store=store, rank=self.rank, world_size=self.world_size
        )

    @requires_gloo()
    @parametrize("permutation", [(1, 0), (2, 0, 1)])
    def test_all_gather_backward_permuted_cotangents(self, permutation):
        self._init_process_group()
        shape = (2, 3, 4)[: len(permutation)]
        x = torch.ones(shape, dtype=torch.float64, requires_grad=True)
        parts = torch.distributed.nn.all_gather(x)
        # the same values, laid out in memory in the order of `permutation`
        cotangents = [
            _cotangent(self.rank, s, shape).permute(permutation).contiguous()
            .permute(torch.argsort(torch.tensor(permutation)).tolist())
            for s in range(self.world_size)
        ]
        self.assertFalse(cotangents[0].is_contiguous())
        torch.autograd.backward(parts, cotangents)
        expected = sum(
            _cotangent(s, self.rank, shape) for s in range(self.world_size)
        )
        self.assertEqual(x.grad, expected)

    @requires_gloo()
    def test_all_gather_backward_loss_reads_parts_transposed(self):
        self._init_process_group()
        x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
        parts = torch.distributed.nn.all_gather(x)
        # d/dp of (p.t() * w).sum() is w.t(): a cotangent in transposed layout
        weights = [_cotangent(self.rank, s, (3, 2)) for s in range(self.world_size)]
        sum((p.t() * w).sum() for p, w in zip(parts, weights)).backward()
        expected = sum(
            _cotangent(s, self.rank, (3, 2)).t() for s in range(self.world_size)
        )
        self.assertEqual(x.grad, expected)


if __name__ == "__main__":
    run_tests()
