# Owner(s): ["oncall: distributed"]
"""all_gather_single / reduce_scatter_single on complex tensors that require grad, on gloo.

The ops returned a view_as_complex view of the buffer the collective writes; gloo's completion
copy bumps that buffer's version counter, and autograd forbids using such a view of a custom
Function's output afterwards: "Output 0 of GeneratedBackwardFor__c10d_functional_..._default is a
view and its base or another view of its base has been modified inplace". It showed (1) in
y.wait() once the collective had completed, and (2) intermittently inside all_gather_single, when
gloo completed between the op's return and the wrapping of its result; the second test makes that
window certain. Suggested home upstream: a gloo test class in
test/distributed/test_c10d_functional_native.py.

Run: python test_funcol_complex_autograd.py
"""

import time
from unittest import mock

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


def _wrap_after_completion(wrap):
    # the collective completes before its result is wrapped, as when gloo's thread wins
    def wrapper(tensor):
        with torch.no_grad():
            torch.ops._c10d_functional.wait_tensor(tensor)
        return wrap(tensor)

    return wrapper


@instantiate_parametrized_tests
class TestComplexCollectivesAutogradGloo(MultiProcessTestCase):
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

    def _locals(self, shape, dtype):
        return [_local_tensor(r, shape, dtype) for r in range(self.world_size)]

    def _cotangents(self, shape, dtype):
        # a different cotangent on every rank
        return [
            _local_tensor(100 * (r + 1), shape, dtype) for r in range(self.world_size)
        ]

    @requires_gloo()
    @parametrize("dtype", [torch.complex64, torch.complex128])
    def test_all_gather_single_complex_wait_after_completion(self, dtype):
        self._init_process_group()
        x = _local_tensor(self.rank, (2, 3), dtype).requires_grad_()
        y = funcol.all_gather_single(x, 0, dist.group.WORLD)
        with torch.no_grad():
            y.wait()  # the collective has completed
        y = y.wait()
        self.assertEqual(y, torch.cat(self._locals((2, 3), dtype)))

        cotangents = self._cotangents(y.shape, dtype)
        y.backward(cotangents[self.rank])
        self.assertEqual(
            x.grad, sum(c.chunk(self.world_size)[self.rank] for c in cotangents)
        )

    @requires_gloo()
    @parametrize("dtype", [torch.complex64, torch.complex128])
    def test_reduce_scatter_single_complex_wait_after_completion(self, dtype):
        self._init_process_group()
        shape = (2 * self.world_size, 3)
        x = _local_tensor(self.rank, shape, dtype).requires_grad_()
        y = funcol.reduce_scatter_single(x, "sum", 0, dist.group.WORLD)
        with torch.no_grad():
            y.wait()  # the collective has completed
        y = y.wait()
        self.assertEqual(
            y, sum(self._locals(shape, dtype)).chunk(self.world_size)[self.rank]
        )

        cotangents = self._cotangents(y.shape, dtype)
        y.backward(cotangents[self.rank])
        self.assertEqual(x.grad, torch.cat(cotangents))

    @requires_gloo()
    @parametrize("gather_dim", [0, 1])
    def test_all_gather_single_complex_completed_before_wrap(self, gather_dim):
        self._init_process_group()
        dtype = torch.complex64
        x = _local_tensor(self.rank, (2, 3), dtype).requires_grad_()
        if self.rank == self.world_size - 1:
            time.sleep(0.5)  # the other ranks' ops return before the collective completes
        with mock.patch.object(
            funcol,
            "_maybe_wrap_tensor",
            _wrap_after_completion(funcol._maybe_wrap_tensor),
        ):
            y = funcol.all_gather_single(x, gather_dim, dist.group.WORLD)
        y = funcol.wait_tensor(y)
        self.assertEqual(y, torch.cat(self._locals((2, 3), dtype), dim=gather_dim))

        cotangents = self._cotangents(y.shape, dtype)
        y.backward(cotangents[self.rank])
        self.assertEqual(
            x.grad,
            sum(c.chunk(self.world_size, dim=gather_dim)[self.rank] for c in cotangents),
        )


if __name__ == "__main__":
    run_tests()
