"""0009 (F12): a neuron DeviceMesh does not reuse a gloo default process group."""

import pytest
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

pytestmark = pytest.mark.torch_patch("0009")


def test_neuron_mesh_gets_its_own_group_cpu_mesh_reuses_default(neuron, process_group):
    with process_group("gloo"):
        default = dist.distributed_c10d._get_default_group()
        cpu_mesh = init_device_mesh("cpu", (1,))
        assert cpu_mesh.get_group() is default
        neuron_mesh = init_device_mesh("neuron", (1,))
        assert neuron_mesh.get_group() is not default, "neuron mesh reuses the gloo default group"
