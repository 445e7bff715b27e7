# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""FlexAttention on ``neuron``: torch 2.13.0's device check rejects PrivateUse1 devices, eager or
compiled. The error then names the upstream fix (patch 0004) instead of only the device."""
from __future__ import annotations

import torch

from .._lazy_import_hooks import when_imported

PATCH = "patches/0004-flex-attention-privateuse1.patch"


def _wrap(module) -> None:
    check = getattr(module, "_validate_device", None)
    if check is None or getattr(check, "_names_patch", False):
        return

    def _validate_device(query, key, value):
        if query.device.type == "neuron":
            try:
                check(query, key, value)
            except ValueError as e:
                raise ValueError(
                    f"{e} torch {torch.__version__} accepts only its built-in devices here; {PATCH} "
                    "lets the PrivateUse1 backend through (make patched-torch builds a torch wheel with it "
                    "into .venv-patched). Until then use F.scaled_dot_product_attention with a mask.") from None
        check(query, key, value)

    _validate_device._names_patch = True
    module._validate_device = _validate_device


def install() -> None:
    when_imported("torch.nn.attention.flex_attention", _wrap)
