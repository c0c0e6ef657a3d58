# Owner(s): ["oncall: distributed"]
"""Complex tensors through functional collectives whose ops reach the backend unconverted.

On gloo, all_gather_single_coalesced (and its alias all_gather_into_tensor_coalesced),
all_to_all_single (and all_to_all_single_autograd, permute_tensor) raised "Invalid scalar type"
for complex inputs. Suggested home upstream: a gloo test class in
test/distributed/test_c10d_functional_native.py.

Run: python test_funcol_complex_gloo.py
"""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.testing._internal.common_distributed import MultiProcessTestCase, requires_gloo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)


def _local_tensor(rank, shape, dtype):
    # distinct real and imaginary parts per element and per rank, so misplacement shows
    n = torch.tensor(shape).prod().item()
    real = torch.arange(n, dtype=torch.float64) + 10 * rank
    return torch.complex(real, -real - 0.5).to(dtype).reshape(shape)


@instantiate_parametrized_tests
class TestComplexFunctionalCollectivesGloo(MultiProcessTestCase):
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
    @parametrize("dtype", [torch.complex64, torch.complex128])
    def test_all_gather_single_coalesced_complex(self, dtype):
        self._init_process_group()
        group = dist.group.WORLD
        shapes = [(4,), (2, 3)]
        inputs = [
            _local_tensor(self.rank, shape, dtype).requires_grad_() for shape in shapes
        ]
        outputs = funcol.all_gather_single_coalesced(inputs, group)
        for shape, output in zip(shapes, outputs):
            expected = torch.cat(
                [_local_tensor(r, shape, dtype) for r in range(self.world_size)]
            )
            self.assertEqual(funcol.wait_tensor(output), expected)

        # backward: a reduce-scatter of every rank's (different) cotangent
        cotangents = [
            [_local_tensor(100 * (r + 1), o.shape, dtype) for o in outputs]
            for r in range(self.world_size)
        ]
        torch.autograd.backward(outputs, cotangents[self.rank])
        for i, x in enumerate(inputs):
            n = x.shape[0]
            expected_grad = sum(
                c[i][self.rank * n : (self.rank + 1) * n] for c in cotangents
            )
            self.assertEqual(x.grad, expected_grad)

    @requires_gloo()
    @parametrize("dtype", [torch.complex64, torch.complex128])
    def test_all_to_all_single_complex(self, dtype):
        self._init_process_group()
        group = dist.group.WORLD
        splits = [2] * self.world_size
        x = _local_tensor(self.rank, (2 * self.world_size, 3), dtype).requires_grad_()
        y = funcol.all_to_all_single(x, splits, splits, group)
        # rank r receives rows 2r:2r+2 of every rank
        locals_ = [
            _local_tensor(r, (2 * self.world_size, 3), dtype)
            for r in range(self.world_size)
        ]
        rows = slice(2 * self.rank, 2 * self.rank + 2)
        self.assertEqual(funcol.wait_tensor(y), torch.cat([t[rows] for t in locals_]))

        # backward: the reverse all-to-all of every rank's (different) cotangent
        cotangents = [
            _local_tensor(100 * (r + 1), y.shape, dtype) for r in range(self.world_size)
        ]
        y.backward(cotangents[self.rank])
        self.assertEqual(x.grad, torch.cat([c[rows] for c in cotangents]))

        # permute_tensor (1-D inputs) is built on all_to_all_single
        peer = self.world_size - 1 - self.rank
        permuted = funcol.permute_tensor(
            _local_tensor(self.rank, (4,), dtype),
            list(reversed(range(self.world_size))),
            group,
        )
        self.assertEqual(
            funcol.wait_tensor(permuted), _local_tensor(peer, (4,), dtype)
        )


if __name__ == "__main__":
    run_tests()
