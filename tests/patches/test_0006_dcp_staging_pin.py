"""0006 (F08): checkpoint staging pins host memory on neuron, and pinned+shared staging works."""

import warnings

import pytest
import torch
from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

pytestmark = pytest.mark.torch_patch("0006")


def _state_dict(neuron):
    torch.manual_seed(0)
    return {"w": torch.randn(64, 64, device=neuron), "b": torch.randn(64, device=neuron)}


def _backend_can_pin():
    try:
        return torch.empty(8, pin_memory=True).is_pinned()
    except RuntimeError:
        return False


def test_staging_into_pinned_memory(neuron):
    if not _backend_can_pin():
        pytest.skip("the neuron backend has no pinned host allocator (torch.empty(pin_memory=True))")
    sd = _state_dict(neuron)
    options = StagingOptions(
        use_pinned_memory=True, use_shared_memory=False, use_async_staging=False, use_non_blocking_copy=False
    )
    staged = DefaultStager(options).stage(sd)
    for name, tensor in staged.items():
        assert tensor.device.type == "cpu"
        assert tensor.is_pinned(), f"staged {name!r} is not in pinned memory"
        torch.testing.assert_close(tensor, sd[name].cpu(), rtol=0, atol=0)


def test_cpu_state_dict_pinned_and_shared(neuron):
    sd = _state_dict(neuron)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        cpu_sd = _create_cpu_state_dict(sd, pin_memory=True, share_memory=True)
    _copy_state_dict(sd, cpu_sd)
    for name, tensor in cpu_sd.items():
        assert tensor.is_shared(), f"{name!r} is not in shared memory"
        torch.testing.assert_close(tensor, sd[name].cpu(), rtol=0, atol=0)
