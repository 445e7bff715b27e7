"""0008 (F11): __dlpack_device__ reports kDLExtDev for neuron tensors."""

import pytest
import torch
from torch.utils.dlpack import DLDeviceType

pytestmark = pytest.mark.torch_patch("0008")


def test_dlpack_device_of_neuron_tensor(neuron):
    for index in range(min(torch.neuron.device_count(), 2)):
        t = torch.ones(3, device=torch.device("neuron", index))
        device_type, device_index = t.__dlpack_device__()
        assert device_type == DLDeviceType.kDLExtDev
        assert device_index == index
