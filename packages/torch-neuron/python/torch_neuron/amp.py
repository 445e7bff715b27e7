"""Automatic mixed precision on device ``neuron``.

The autocast cast policy (which ops run in the lower-precision dtype and which in
float32) is registered in C++ with CUDA's op lists; this module sets the default
lower-precision dtype, as CUDA's is float16 and Trainium's native one is bfloat16.
"""
from __future__ import annotations

import torch


def install() -> None:
    # torch.autocast("neuron") without dtype uses the backend's fast dtype.
    torch.set_autocast_dtype("neuron", torch.bfloat16)
