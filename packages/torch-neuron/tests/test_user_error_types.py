"""Each user mistake raises the exception class CUDA raises for the same mistake, so code written
against torch.cuda (``except torch.AcceleratorError``, ``except torch.OutOfMemoryError``,
``except ValueError``...) catches it unchanged, and the message names the device, the sizes and
the knob. Where CUDA's type comes from:

- a bad ordinal reaching the runtime (tensor factories, ``.to``, ``set_device``, device and
  stream contexts, ``synchronize``, ``torch.accelerator``): ``cudaSetDevice`` fails and
  C10_CUDA_CHECK raises ``torch.AcceleratorError`` ("invalid device ordinal");
- ``get_device_properties``/``get_device_name``: torch/cuda/__init__.py raises
  ``AssertionError("Invalid device id")``;
- ``get_rng_state``/``set_rng_state``: torch/cuda/random.py indexes ``default_generators``:
  ``IndexError``;
- a device argument of the wrong kind: torch's ``_get_device_index`` raises ``ValueError``;
- allocation beyond capacity: ``torch.OutOfMemoryError``;
- tensors on two devices in one op, events that were never recorded or have timing disabled
  (torch.cuda.Event checks both itself),
  a wrong-sized RNG state: plain ``RuntimeError`` (TORCH_CHECK in ATen and CUDAEvent.h).
"""
from __future__ import annotations

import io

import pytest
import torch

N = torch.neuron.device_count()
BAD = N + 95


def _elapsed_unrecorded():
    torch.neuron.Event(enable_timing=True).elapsed_time(torch.neuron.Event(enable_timing=True))


def _elapsed_without_timing():
    a, b = torch.neuron.Event(), torch.neuron.Event()
    a.record()
    b.record()
    b.synchronize()
    a.elapsed_time(b)


def _load_to_missing_device():
    buf = io.BytesIO()
    torch.save(torch.ones(2), buf)
    buf.seek(0)
    torch.load(buf, map_location=f"neuron:{BAD}")


# (mistake, call, exact exception type, message fragments)
TABLE = [
    ("factory on a missing device", lambda: torch.ones(1, device=f"neuron:{BAD}"),
     torch.AcceleratorError, ["invalid device ordinal", f"neuron:{BAD}", "NEURON_RT_VISIBLE_CORES"]),
    ("copy to a missing device", lambda: torch.ones(2).to(f"neuron:{BAD}"),
     torch.AcceleratorError, ["invalid device ordinal", f"neuron:{BAD}"]),
    ("set_device out of range", lambda: torch.neuron.set_device(BAD),
     torch.AcceleratorError, ["invalid device ordinal", f"{N} neuron device(s)"]),
    ("device context out of range", lambda: torch.neuron.device(BAD).__enter__(),
     torch.AcceleratorError, ["invalid device ordinal"]),
    ("accelerator set_device_index", lambda: torch.accelerator.set_device_index(BAD),
     torch.AcceleratorError, ["invalid device ordinal"]),
    ("Stream on a missing device", lambda: torch.neuron.Stream(device=BAD),
     torch.AcceleratorError, ["invalid device ordinal"]),
    ("synchronize a missing device", lambda: torch.neuron.synchronize(BAD),
     torch.AcceleratorError, [f"{BAD}", "NEURON_RT_VISIBLE_CORES"]),
    ("memory_stats of a missing device", lambda: torch.neuron.memory_stats(BAD),
     torch.AcceleratorError, ["invalid device ordinal"]),
    ("get_device_properties out of range", lambda: torch.neuron.get_device_properties(BAD),
     AssertionError, ["Invalid device id", f"neuron:{BAD}"]),
    ("get_device_name out of range", lambda: torch.neuron.get_device_name(BAD),
     AssertionError, ["Invalid device id"]),
    ("get_rng_state out of range", lambda: torch.neuron.get_rng_state(BAD),
     IndexError, ["Invalid device id", f"neuron:{BAD}"]),
    ("set_rng_state out of range",
     lambda: torch.neuron.set_rng_state(torch.neuron.get_rng_state(0), BAD),
     IndexError, ["Invalid device id"]),
    ("device argument of the wrong kind", lambda: torch.neuron.set_device(1.5),
     ValueError, ["Expected a torch.device with a specified index or an integer", "float"]),
    ("a cpu device where neuron is expected", lambda: torch.neuron.set_device("cpu"),
     ValueError, ["Expected a neuron device", "cpu"]),
    ("allocation beyond HBM", lambda: torch.empty(1 << 45, dtype=torch.uint8, device="neuron"),
     torch.OutOfMemoryError, ["out of memory", "35184372088832 bytes", "NEURON_SIM_HBM_CAPACITY"]),
    ("tensors on two neuron devices", lambda: torch.ones(2, device="neuron:0") + torch.ones(2, device="neuron:1"),
     RuntimeError, ["Expected all tensors to be on the same device", "neuron:0", "neuron:1"]),
    ("neuron and cpu tensors in mm", lambda: torch.ones(2, 2, device="neuron") @ torch.ones(2, 2),
     RuntimeError, ["Expected all tensors to be on the same device", "cpu"]),
    ("elapsed_time of unrecorded events", _elapsed_unrecorded,
     RuntimeError, ["must be recorded"]),
    ("elapsed_time without enable_timing", _elapsed_without_timing,
     RuntimeError, ["enable_timing=True", "DISABLE_TIMING"]),
    ("RNG state of the wrong size",
     lambda: torch.neuron.set_rng_state(torch.zeros(3, dtype=torch.uint8)),
     RuntimeError, ["16 bytes", "got 3 bytes"]),
    ("torch.load to a missing device", _load_to_missing_device,
     RuntimeError, [f"device {BAD}", "device_count() is", "map_location"]),
]


@pytest.mark.parametrize("mistake,call,expected,fragments", TABLE, ids=[t[0] for t in TABLE])
def test_mistake_raises_cudas_exception_type(mistake, call, expected, fragments):
    with pytest.raises(BaseException) as info:
        call()
    assert type(info.value) is expected, (
        f"{mistake}: raised {type(info.value).__name__}({info.value}), CUDA raises {expected.__name__}")
    for fragment in fragments:
        assert fragment in str(info.value), f"{mistake}: {fragment!r} not in {info.value}"


def test_accelerator_error_is_caught_as_runtime_error_and_carries_the_code():
    # Code written before torch.AcceleratorError existed catches RuntimeError.
    with pytest.raises(RuntimeError) as info:
        torch.ones(1, device=f"neuron:{BAD}")
    assert isinstance(info.value, torch.AcceleratorError)
    assert info.value.error_code != 0


def test_device_stays_usable_after_each_mistake():
    for _, call, expected, _ in TABLE:
        with pytest.raises(expected):
            call()
    x = torch.arange(6.0, device="neuron").reshape(2, 3)
    torch.testing.assert_close((x * 2).sum(0).cpu(), torch.arange(6.0).reshape(2, 3).mul(2).sum(0))
    assert torch.neuron.current_device() == 0
