# Owner(s): ["module: inductor", "oncall: distributed"]
"""Inductor's lowerings of the functional collectives keep the input's dtype.

register_comm_lowering registered the _c10d_functional lowerings with register_lowering's
default elementwise type promotion, which promoted the input tensor together with the op's int
arguments (group_size, src): a bool input became int64, so torch.compile(backend="inductor")
returned int64 where eager returns bool (all-gather, the in-place dist.all_gather_into_tensor
that Dynamo rewrites into it, broadcast, reduce-scatter; the reduce-scatter also summed to 2).
uint8 and int8, which an int argument does not promote, are controls. Suggested home upstream:
the compiled tests of test/distributed/test_c10d_functional_native.py.

Run: python test_funcol_compiled_bool.py
"""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch._inductor.utils import fresh_cache
from torch.testing._internal.common_distributed import MultiProcessTestCase, requires_gloo
from torch.testing._internal.common_utils import run_tests

DTYPES = [torch.bool, torch.uint8, torch.int8]


def _local_tensor(rank, dtype):
    # a different pattern of zeros and ones on every rank
    return torch.tensor([1, 0, 1, 1]).add(rank).remainder(2).to(dtype)


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

    def _check_compiled(self, fn, make_input, expected):
        # one process per test: every dtype is compiled and checked in turn
        for dtype in DTYPES:
            torch._dynamo.reset()
            with fresh_cache():
                out = torch.compile(fn, backend="inductor", fullgraph=True)(
                    make_input(self.rank, dtype)
                )
            want = expected(dtype)
            self.assertEqual(out.dtype, want.dtype, msg=f"input dtype {dtype}")
            self.assertEqual(out, want, msg=f"input dtype {dtype}")

    @requires_gloo()
    def test_compiled_all_gather_keeps_dtype(self):
        self._init_process_group()
        group = dist.group.WORLD

        def gathered(dtype):
            return torch.cat([_local_tensor(r, dtype) for r in range(self.world_size)])

        self._check_compiled(
            lambda x: funcol.all_gather_tensor(x, 0, group), _local_tensor, gathered
        )

        def gather_into_tensor(x):  # Dynamo rewrites it into the functional op
            out = torch.empty(self.world_size * x.shape[0], dtype=x.dtype)
            dist.all_gather_into_tensor(out, x)
            return out

        self._check_compiled(gather_into_tensor, _local_tensor, gathered)

    @requires_gloo()
    def test_compiled_broadcast_keeps_dtype(self):
        self._init_process_group()
        group = dist.group.WORLD
        self._check_compiled(
            lambda x: funcol.broadcast(x, 0, group),
            _local_tensor,
            lambda dtype: _local_tensor(0, dtype),
        )

    @requires_gloo()
    def test_compiled_reduce_scatter_keeps_dtype(self):
        self._init_process_group()
        group = dist.group.WORLD

        def reduce_input(rank, dtype):  # ones meet: a sum in int64 would give 2
            return torch.tensor([1, 1, rank % 2, 0]).to(dtype)

        def reduced(dtype):
            total = reduce_input(0, dtype)
            for r in range(1, self.world_size):
                total = total + reduce_input(r, dtype)  # bool: logical or
            n = total.shape[0] // self.world_size
            return total[self.rank * n : (self.rank + 1) * n]

        self._check_compiled(
            lambda x: funcol.reduce_scatter_tensor(x, "sum", 0, group),
            reduce_input,
            reduced,
        )


if __name__ == "__main__":
    run_tests()
