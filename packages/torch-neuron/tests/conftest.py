"""Fixtures shared by the torch-neuron suites."""
import pytest
import torch_neuron


@pytest.fixture
def numerics():
    """Device-numerics mode for one test: native ops take their values from their tile kernels."""
    torch_neuron.set_device_numerics(True)
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    try:
        yield
    finally:
        torch_neuron.set_device_numerics(False)
