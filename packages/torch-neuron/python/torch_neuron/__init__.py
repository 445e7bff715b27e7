"""PyTorch backend for device ``neuron`` (AWS Trainium), running on the neuron_sim device.

Loaded automatically by ``import torch`` (entry point group ``torch.backends``;
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` disables that). Registers the PrivateUse1
backend under the name ``neuron`` and the device module ``torch.neuron``.
"""
from __future__ import annotations

from importlib import metadata as _metadata

__version__ = _metadata.version("torch-neuron-backend")  # written once, in pyproject.toml


def _autoload() -> None:
    """Entry point for ``torch.backends``: importing this package performs the registration.

    Defined before ``import torch`` so that ``import torch_neuron`` as a program's first
    import works: torch's autoload then finds this function on the partially
    initialised package, and the registration below runs once torch is imported.
    """


import torch  # noqa: E402


def _check_no_other_backend() -> None:
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        raise RuntimeError(
            f"torch_neuron: PyTorch's PrivateUse1 backend is already registered as '{name}'. "
            "Only one PrivateUse1 backend can exist per process; uninstall the other backend "
            "or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import only one of them.")
    existing = getattr(torch, "neuron", None)
    if name == "neuron" and existing is not None and not getattr(existing, "__name__", "").startswith("torch_neuron"):
        raise RuntimeError(
            f"torch_neuron: device 'neuron' is already registered by {existing.__name__} "
            "(for example AWS torch-neuronx). Only one 'neuron' backend can be loaded per process; "
            "uninstall one of them, or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import the one you want.")


_check_no_other_backend()

# The native module binds a c10d backend class; its base type is registered when
# torch.distributed initialises c10d.
import torch.distributed  # noqa: E402,F401
from . import _C  # noqa: E402  (loads the native backend: kernels, guard, allocator, hooks)
from . import env as _env  # noqa: E402
from . import neuron  # noqa: E402

if torch._C._get_privateuse1_backend_name() != "neuron":
    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", neuron)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
_C._init()
_C.set_strict(_env.get_bool("TORCH_NEURON_STRICT"))
from . import fallback  # noqa: E402  (the fallback warning policy, TORCH_NEURON_FALLBACK_WARN)
fallback.install()

from . import _exit  # noqa: E402
from . import native  # noqa: E402  (the torch-to-kernel bridge: op table, nki_op)
from . import _dynamo_interface  # noqa: E402
from . import amp  # noqa: E402
from . import distributed  # noqa: E402  (registers the c10d backend "neuron")

native.install(_C.get_device_properties(0)["profile"] if _C.device_count() else "trn2")
if _env.get_bool("TORCH_NEURON_DEVICE_NUMERICS"):
    native.set_device_numerics(True)
if _env.get_bool("TORCH_NEURON_BACKWARD_ON_CALLER"):
    torch._C._set_multithreading_enabled(False)
_exit.install()
_dynamo_interface.install()
from .compile import routing as _compile_routing  # noqa: E402
_compile_routing.install()
from .compile import flex_attention as _flex_attention  # noqa: E402
_flex_attention.install()
amp.install()

try:
    from . import workarounds as _workarounds  # noqa: E402
except ImportError:  # pragma: no cover - the module ships with the package
    _workarounds = None
if _workarounds is not None:
    _workarounds.install()

from . import sanitizer  # noqa: E402  (the stream-race sanitizer, TORCH_NEURON_SANITIZE)

sanitizer._enable_from_environment()

if _env.get_bool("TORCH_NEURON_SHAPE_ONLY"):
    from .projection import shape_execution as _shape_execution  # noqa: E402

    _shape_execution._enable_from_environment()


from .native import NKIKernel, nki_op, wrap_nki  # noqa: E402


def compile_stats() -> dict:
    """What torch.compile(backend="neuron") compiled and ran since the last clear: graphs, AOT
    partitions, fused kernels with their op chains, eager/kernel/fallback nodes, seconds per
    stage, kernel-cache hits and misses, fused launches and their HBM bytes."""
    from .compile import compile_stats as stats
    return stats()


def clear_compile_stats() -> None:
    from .compile import clear_compile_stats as clear
    clear()


# ----------------------------------------------------------------------------- op tracking
def get_executed_ops() -> dict[str, dict[str, int]]:
    """Ops executed on neuron since the last clear: {op: {"native": n, "fallback": n}}."""
    out: dict[str, dict[str, int]] = {}
    for op, _dtype, native, fallback in _C.op_counts():
        entry = out.setdefault(op, {"native": 0, "fallback": 0})
        entry["native"] += native
        entry["fallback"] += fallback
    return out


def get_fallback_ops() -> dict[str, int]:
    """Ops that ran on the host (no native neuron kernel): {op: executions}."""
    return {op: c["fallback"] for op, c in get_executed_ops().items() if c["fallback"]}


def get_op_stats() -> list[dict]:
    """Per op and dtype: native and fallback execution counts."""
    return [dict(op=op, dtype=dtype, native=n, fallback=f) for op, dtype, n, f in _C.op_counts()]


native_rejections = native.native_rejections
set_device_numerics = native.set_device_numerics
device_numerics_enabled = native.device_numerics_enabled
device_numerics_stats = native.device_numerics_stats
clear_device_numerics_stats = native.clear_device_numerics_stats


def clear_op_tracking() -> None:
    _C.clear_op_counts()


def set_strict(strict: bool) -> None:
    """Strict mode: an op with no native kernel raises instead of running on the host."""
    _C.set_strict(bool(strict))


set_fallback_warnings = fallback.set_fallback_warnings
fallback_warnings = fallback.fallback_warnings
FallbackWarning = fallback.FallbackWarning


def device_time_ns(device=None) -> float:
    """Simulated device clock of ``device``: the time (ns) at which all queued work ends."""
    return _C.device_time_ns(neuron._index(device))


# TorchNeuron-compatible top-level aliases.
synchronize = neuron.synchronize
current_stream = neuron.current_stream
default_stream = neuron.default_stream
set_stream = neuron.set_stream
stream = neuron.stream
device = neuron.device
Stream = neuron.Stream
Event = neuron.Event
get_device_properties = neuron.get_device_properties
empty_cache = neuron.empty_cache
memory_stats = neuron.memory_stats
memory_allocated = neuron.memory_allocated
max_memory_allocated = neuron.max_memory_allocated
memory_reserved = neuron.memory_reserved
memory_summary = neuron.memory_summary
