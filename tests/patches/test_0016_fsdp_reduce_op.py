"""0016 (F19): FSDP2 on a neuron process group whose backend reduces only with SUM.

Many collective libraries implement SUM/MIN/MAX but not NCCL's AVG and PREMUL_SUM. Vanilla
FSDP2 reduce-scatters gradients with AVG (PREMUL_SUM with a gradient divide factor) on
every device but "mtia", so its backward fails on such a backend. With the patch FSDP2 asks
the process group (``supports_reduce_op``) and falls back to SUM plus a division.

The backend here is a c10d backend registered by the test for device "neuron": a Python
process group that forwards collectives to the world group (backend "neuron"), records the
reduce ops it is given and rejects those it declares unsupported. Two ranks on 127.0.0.1.
"""

import copy
import os
import sys

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.torch_patch("0016")


def test_fsdp2_grads_on_backend_without_avg_premul_sum(neuron):
    from _ranks import run_ranks

    run_ranks(os.path.abspath(__file__), "fsdp", world=2)


def _make_group_class():
    import torch.distributed as dist
    from torch.distributed import ReduceOp

    class RecordingGroup(dist.ProcessGroup):
        """Runs collectives on its neuron backend; rejects reduce ops outside ``supported``."""

        def __init__(self, rank, size):
            super().__init__(rank, size)
            self.supported = {ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX}
            self.seen = []

        def supports_reduce_op(self, op):
            return op in self.supported

        def _check(self, op):
            op = op if isinstance(op, ReduceOp.RedOpType) else op.op
            self.seen.append(op)
            if op not in self.supported:
                raise RuntimeError(f"recording backend: {op} is not supported")

        def reduce_scatter_single(self, output, input, opts):
            self._check(opts.reduceOp)
            return super().reduce_scatter_single(output, input, opts)

        def reduce_scatter_single_coalesced(self, outputs, inputs, opts):
            self._check(opts.reduceOp)
            return super().reduce_scatter_single_coalesced(outputs, inputs, opts)

        def allreduce(self, tensors, opts):
            self._check(opts.reduceOp)
            return super().allreduce(tensors, opts)

    def create(dist_opts, backend_options):
        import torch_neuron.distributed

        group = RecordingGroup(dist_opts.group_rank, dist_opts.group_size)
        # The collectives run in a neuron backend of this group's own.
        backend = torch_neuron.distributed._create_backend(dist_opts, backend_options)
        group._register_backend(torch.device("neuron"), dist.ProcessGroup.BackendType.CUSTOM, backend)
        return group

    return create


def _fsdp():
    import datetime

    import torch.distributed as dist
    import torch_neuron.distributed  # noqa: F401  (registers c10d backend "neuron")
    from _ranks import OK_LINE, rank_env
    from torch.distributed import ReduceOp
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    rank, world = rank_env()
    torch.neuron.set_device(rank % torch.neuron.device_count())
    dev = torch.device("neuron", torch.neuron.current_device())
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=60))
    dist.Backend.register_backend("recording", _make_group_class(), extended_api=True, devices=["neuron"])
    try:
        inputs = [torch.randn(4, 16, generator=torch.Generator().manual_seed(100 + r)) for r in range(world)]

        def train_step(supported, divide_factor=None):
            pg = dist.new_group(backend="recording")
            pg.supported = supported
            mesh = DeviceMesh.from_group(pg, "neuron")
            torch.manual_seed(0)
            reference = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
            model = copy.deepcopy(reference).to(dev)
            fully_shard(model, mesh=mesh)
            if divide_factor is not None:
                model.set_gradient_divide_factor(divide_factor)
            model(inputs[rank].to(dev)).sum().backward()
            # Gradients of the whole batch (all ranks' inputs) on the CPU, then the
            # data-parallel division: by the world size, or by the custom factor.
            for x in inputs:
                reference(x).sum().backward()
            divisor = divide_factor if divide_factor is not None else world
            for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
                torch.testing.assert_close(
                    p.grad.full_tensor().cpu(), q.grad / divisor, rtol=1e-5, atol=1e-5, msg=lambda m: f"{name}: {m}"
                )
            return pg.seen

        only_sum = {ReduceOp.SUM, ReduceOp.MIN, ReduceOp.MAX}
        seen = train_step(only_sum)
        assert seen and set(seen) == {ReduceOp.SUM}, seen
        seen = train_step(only_sum, divide_factor=3.0)
        assert seen and set(seen) == {ReduceOp.SUM}, seen
        # A backend that declares AVG and PREMUL_SUM keeps getting them.
        every_op = only_sum | {ReduceOp.AVG, ReduceOp.PREMUL_SUM}
        assert set(train_step(every_op)) == {ReduceOp.AVG}
        assert set(train_step(every_op, divide_factor=3.0)) == {ReduceOp.PREMUL_SUM}
        print(OK_LINE, flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    {"fsdp": _fsdp}[sys.argv[1]]()
