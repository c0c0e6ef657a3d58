# Owner(s): ["module: inductor", "oncall: distributed"]
"""Inductor's lowerings of the functional collectives keep the input's dtype.

register_comm_lowering registered the _c10d_functional lowerings with register_lowering's
default type promotion, which promoted the input tensor together with the op's int arguments
(group_size, src): a bool input became int64, so torch.compile(backend="inductor") returned
int64 for the bool all-gather / broadcast that eager returns as bool. uint8 and int8 (which an int
does not promote) are controls. Suggested home upstream: the compiled tests of
test/distributed/test_c10d_functional_native.py.

Run: python test_funcol_compiled_bool.py
"""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch._inductor.utils import fresh_cache
from torch.testing._internal.common_distributed import MultiProcessTestCase, requires_gloo
from torch.testing._internal.common_utils import (
    instantiate_parametrized_tests,
    parametrize,
    run_tests,
)

DTYPES = [torch.bool, torch.uint8, torch.int8]


def _local_tensor(rank, dtype):
    # a different pattern of zeros and ones on every rank
    return torch.tensor([1, 0, 1, 1]).add(rank).remainder(2).to(dtype)


@instantiate_parametrized_tests
class TestCompiledCollectiveDtypeGloo(MultiProcessTestCase):
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

    def _compiled(self, fn, x):
        torch._dynamo.reset()
        with fresh_cache():
            return torch.compile(fn, backend="inductor", fullgraph=True)(x)

    @requires_gloo()
    @parametrize("dtype", DTYPES)
    def test_compiled_all_gather_tensor_keeps_dtype(self, dtype):
        self._init_process_group()
        group = dist.group.WORLD
        expected = torch.cat(
            [_local_tensor(r, dtype) for r in range(self.world_size)]
        )
        out = self._compiled(
            lambda x: funcol.all_gather_tensor(x, 0, group),
            _local_tensor(self.rank, dtype),
        )
        self.assertEqual(out.dtype, dtype)
        self.assertEqual(out, expected)

    @requires_gloo()
    @parametrize("dtype", DTYPES)
    def test_compiled_broadcast_keeps_dtype(self, dtype):
        self._init_process_group()
        group = dist.group.WORLD
        out = self._compiled(
            lambda x: funcol.broadcast(x, 0, group), _local_tensor(self.rank, dtype)
        )
        self.assertEqual(out.dtype, dtype)
        self.assertEqual(out, _local_tensor(0, dtype))


if __name__ == "__main__":
    run_tests()
