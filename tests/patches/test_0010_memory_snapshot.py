"""0010 (F13): torch.accelerator.memory._snapshot() goes to the neuron backend, not CUDA."""

import pytest
import torch

pytestmark = pytest.mark.torch_patch("0010")


def test_snapshot_uses_current_accelerator(neuron):
    backend_snapshot = getattr(getattr(torch.neuron, "memory", None), "_snapshot", None)
    if backend_snapshot is not None:
        assert isinstance(torch.accelerator.memory._snapshot(), dict)
    else:
        with pytest.raises(NotImplementedError, match="neuron"):
            torch.accelerator.memory._snapshot()
