"""neuron_ccl: collective communication over neuron_sim device buffers.

A :class:`Communicator` joins ``size`` processes, each on one neuron_sim device, bootstrapped
through a key-value store (:class:`TCPStore`, or any object with ``set(key, bytes)`` and a
blocking ``get(key) -> bytes``, such as a c10d Store). Buffers are device addresses (ints from
``neuron_sim.malloc``); counts are in elements. Every operation runs synchronously and is
placed on the device's default queue for its modelled interconnect time.
"""

from __future__ import annotations

import os
from importlib import metadata as _metadata

from . import _C
from ._C import (
    CclError,
    CclMismatchError,
    CclPeerError,
    CclTimeoutError,
    Communicator,
    TCPStore,
    select_algorithm,
)

__version__ = _metadata.version("neuron-ccl")  # written once, in pyproject.toml

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", "bool")
REDUCE_OPS = ("sum", "product", "min", "max", "avg", "premul_sum", "band", "bor", "bxor")


def env_vars() -> list[tuple[str, str, str, str]]:
    """(name, type, default, meaning) of every environment variable neuron_ccl reads."""
    return _C.env_vars()


def get_include() -> str:
    """Directory holding ``neuron_ccl/neuron_ccl.h`` (for native consumers such as torch_neuron)."""
    return os.path.join(os.path.dirname(__file__), "include")


def get_library_dir() -> str:
    """Directory holding ``libneuron_ccl.so``."""
    return os.path.join(os.path.dirname(__file__), "lib")


__all__ = [
    "CclError", "CclMismatchError", "CclPeerError", "CclTimeoutError", "Communicator", "TCPStore",
    "DTYPES", "REDUCE_OPS", "env_vars", "get_include", "get_library_dir", "select_algorithm",
]
