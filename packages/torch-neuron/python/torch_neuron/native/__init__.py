# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The one bridge from torch to tile kernels: eager native ops and ``nki_op`` both go through it.

- ``bridge``: the torch <-> ISA dtype map, zero-copy host views, launch accounting.
- ``binders``: an op's ATen arguments -> its kernel's launches (or why not covered).
- ``estimate``: a native call's device time (the kernel's simulated schedule).
- ``numerics``: device-numerics mode (values from the tile kernels).
- ``install``: registering neuron_kernels' op table with the backend.
- ``custom_ops``: user tile kernels as torch ops (``nki_op``, ``wrap_nki``).
- ``coverage``: the coverage document generated from the op table.

For each (op, dtype) in the table, executions are counted as native and timed by the kernel's
engine schedule; a call the binding does not cover (a shape, dtype or attribute outside the
row's notes, e.g. add with alpha != 1 or a sum over two dims) runs as a fallback, and
``native_rejections()`` says why.
"""
from .custom_ops import NKIKernel, nki_op, wrap_nki
from .estimate import native_rejections
from .install import install
from .numerics import (NUMERICS_ENV, clear_device_numerics_stats, device_numerics_enabled,
                       device_numerics_stats, set_device_numerics)

__all__ = ["NKIKernel", "nki_op", "wrap_nki", "install", "native_rejections", "NUMERICS_ENV",
           "set_device_numerics", "device_numerics_enabled", "device_numerics_stats",
           "clear_device_numerics_stats"]
