"""Dynamo device interface for ``neuron`` (``torch._dynamo.device_interface``).

Registered when torch._dynamo.device_interface is first imported, so that
``import torch`` does not pay for importing Dynamo.
"""
from __future__ import annotations

import torch

from ._lazy_import_hooks import when_imported


def _register(mod) -> None:
    import torch_neuron.neuron as neuron

    class NeuronInterface(mod.DeviceInterface):
        device = neuron.device
        Event = neuron.Event
        Stream = neuron.Stream

        class Worker:
            @staticmethod
            def set_device(device: int):
                neuron.set_device(device)

            @staticmethod
            def current_device() -> int:
                return neuron.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return neuron.get_device_properties(device)

        current_device = staticmethod(neuron.current_device)
        set_device = staticmethod(neuron.set_device)
        device_count = staticmethod(neuron.device_count)
        stream = staticmethod(neuron.stream)
        current_stream = staticmethod(neuron.current_stream)
        set_stream = staticmethod(neuron.set_stream)
        synchronize = staticmethod(neuron.synchronize)
        get_device_properties = staticmethod(neuron.get_device_properties)
        get_raw_stream = staticmethod(lambda device_idx: neuron.current_stream(device_idx).stream_id)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            neuron.set_stream(neuron.Stream(stream_id=stream_id, device_index=device_index,
                                            device_type=device_type))

        @staticmethod
        def get_compute_capability(device=None):
            p = neuron.get_device_properties(device)
            return p.major * 10 + p.minor

        @staticmethod
        def is_available() -> bool:
            return neuron.is_available()

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

        @staticmethod
        def memory_allocated(device=None) -> int:
            return neuron.memory_allocated(device)

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

        @staticmethod
        def raise_if_triton_unavailable(device=None) -> None:
            raise RuntimeError("neuron: Triton does not target device neuron")

    mod.register_interface_for_device("neuron", NeuronInterface)
    for i in range(neuron.device_count()):
        mod.register_interface_for_device(f"neuron:{i}", NeuronInterface)


def install() -> None:
    when_imported("torch._dynamo.device_interface", _register)
