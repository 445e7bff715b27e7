"""Keeps ``Module.to("neuron")`` tying-preserving and identity-preserving on torch 2.13.

``Module._apply`` keeps a Parameter object only when
``torch._has_compatible_shallow_copy_type(old, new)`` holds; in torch 2.13 the
C++ check (``TensorImpl::has_compatible_shallow_copy_type``) lists the dense
backends CPU, CUDA, MPS, HIP, XPU, HPU and MTIA but not PrivateUse1. Moving a
module to or from ``neuron`` therefore replaces every Parameter, which breaks
weight tying (GPT-2 ``lm_head``/``wte``) and optimizers created before the move.
The upstream fix is a one-line C++ change (patch series); until the installed
torch has it, ``_apply`` is wrapped: after the stock conversion, each replaced
Parameter's contents are swapped into the original object
(``torch.utils.swap_tensors``) and every owner points at it again.
"""
from __future__ import annotations

import threading
import warnings

import torch
from torch.nn import Module, Parameter

_state = threading.local()


def _needs_fix() -> bool:
    a = torch.empty(1)
    b = torch.empty(1, device="neuron")
    return not torch._has_compatible_shallow_copy_type(a, b)


def _crosses_neuron(old: torch.Tensor, new: torch.Tensor) -> bool:
    return old.device.type != new.device.type and "neuron" in (old.device.type, new.device.type)


def _restore(owners: dict[int, tuple[Parameter, list[tuple[Module, str]]]]) -> None:
    for old, places in owners.values():
        replaced = [(m, n, m._parameters.get(n)) for m, n in places]
        first_new = next((p for _, _, p in replaced if p is not None and p is not old), None)
        if first_new is None or not _crosses_neuron(old, first_new):
            continue
        keep = old
        try:
            torch.utils.swap_tensors(old, first_new)
        except RuntimeError as e:
            warnings.warn(
                f"torch_neuron: could not keep the identity of a Parameter moved to/from neuron ({e}); "
                "tied parameters stay tied but the Parameter objects are new.", stacklevel=3)
            keep = first_new
        for module, name, _ in replaced:
            module._parameters[name] = keep


_original_apply = Module._apply


def _apply(self: Module, fn, recurse: bool = True):
    if getattr(_state, "active", False) or torch.__future__.get_swap_module_params_on_conversion():
        return _original_apply(self, fn, recurse)
    owners: dict[int, tuple[Parameter, list[tuple[Module, str]]]] = {}
    modules = self.modules() if recurse else [self]
    for module in modules:
        for name, p in module._parameters.items():
            if p is not None:
                owners.setdefault(id(p), (p, []))[1].append((module, name))
    _state.active = True
    try:
        _original_apply(self, fn, recurse)
    finally:
        _state.active = False
    _restore(owners)
    return self


def install() -> None:
    if _needs_fix() and Module._apply is _original_apply:
        Module._apply = _apply
