"""TorchNeuron's ``torch_neuronx`` Python API over torch-neuron-backend's device ``neuron``.

The device itself needs no import: ``import torch`` autoloads ``torch_neuron``. This module
is what code written for AWS TorchNeuron imports (streams, memory statistics, op tracking,
NKI kernels), and its presence is how Hugging Face transformers and accelerate decide to use
device ``neuron`` (they look for a module named ``torch_neuronx``).
"""
from __future__ import annotations

from . import ownership as _ownership

_problem = _ownership.owner_problem(__file__)
if _problem is not None:
    raise ImportError(_problem)
del _problem

__version__ = _ownership.metadata.version(_ownership.DISTRIBUTION)  # written once, in pyproject.toml

import torch_neuron as _backend

# One name per row of TorchNeuron's top-level API (streams, device, memory, op tracking, NKI);
# each is torch_neuron's own object, so both imports see the same state.
_EXPORTS = (
    "synchronize", "current_stream", "default_stream", "set_stream", "stream", "device",
    "Stream", "Event", "get_device_properties",
    "empty_cache", "memory_stats", "memory_allocated", "max_memory_allocated",
    "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "memory_summary",
    "get_fallback_ops", "get_executed_ops", "clear_op_tracking",
    "nki_op", "wrap_nki",
)


def _resolve(name: str):
    # torch_neuron exposes most names at top level; the rest live in torch.neuron.
    if hasattr(_backend, name):
        return getattr(_backend, name)
    return getattr(_backend.neuron, name)


globals().update({name: _resolve(name) for name in _EXPORTS})
__all__ = list(_EXPORTS)
