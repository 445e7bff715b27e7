import os
import sys

import pytest
import torch_neuron

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _fresh_compile_state(tmp_path, monkeypatch):
    """Each test compiles from scratch, with its own kernel cache directory."""
    import torch._dynamo
    monkeypatch.setenv("TORCH_NEURON_COMPILE_CACHE_DIR", str(tmp_path / "kernel-cache"))
    torch._dynamo.reset()
    torch_neuron.clear_compile_stats()
    yield
    torch._dynamo.reset()
