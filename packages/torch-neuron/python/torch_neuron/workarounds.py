# Copyright (c) the torch-neuron authors. Licensed under the Apache License, Version 2.0.
"""Runtime workarounds for torch bugs that silently give wrong results on ``neuron``.

Each workaround is keyed to the patch in ``patches/`` that fixes torch itself. It is
installed only when the running torch lacks that fix (checked on torch's own code, not
its version string), and it warns once, the first time it changes behaviour (0014, which
only keeps the Parameter objects torch would replace, is silent).

``TORCH_NEURON_DISABLE_WORKAROUNDS=1`` installs none of them; the patch proof tests
(``python -m tools.patches matrix``) run that way to show the unpatched behaviour.

| patch | finding | what breaks on vanilla torch 2.13.0 |
|-------|---------|--------------------------------------|
| 0001  | F01     | ``torch.utils.checkpoint`` does not replay the neuron RNG: wrong gradients with dropout |
| 0002  | F02     | ``GradScaler()`` / ``ShardedGradScaler()`` default to CUDA and disable loss scaling |
| 0014  | tied weights | ``Module.to("neuron")`` replaces every Parameter: tied weights untie, optimizers made before the move update stale tensors |
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import logging
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import env as _env

DISABLE_ENV = "TORCH_NEURON_DISABLE_WORKAROUNDS"

logger = logging.getLogger(__name__)

# patch id -> "applied" | "not needed" | "disabled"
_status: dict[str, str] = {}
_warned: set[str] = set()


@dataclass(frozen=True)
class Workaround:
    patch_id: str
    finding: str
    summary: str
    fixed_in_torch: Callable[[], bool]
    apply: Callable[[], None]


def _backend_name() -> str:
    return torch._C._get_privateuse1_backend_name()


def _warn_once(patch_id: str) -> None:
    if patch_id in _warned:
        return
    _warned.add(patch_id)
    w = _BY_ID[patch_id]
    warnings.warn(
        f"torch_neuron workaround {w.patch_id} ({w.finding}) is active: {w.summary}. "
        f"torch {torch.__version__} lacks the fix in patches/{w.patch_id}-*.patch; "
        f"set {DISABLE_ENV}=1 to turn the workaround off.",
        stacklevel=3,
    )


# --- 0001 (F01): activation checkpointing and the device RNG -----------------------------


class _CheckpointDeviceModule:
    """torch.<backend> with the CUDA-style attributes vanilla checkpointing reads."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    @property
    def _initialized(self) -> bool:
        initialized = bool(self._module.is_initialized())
        if initialized:
            _warn_once("0001")
        return initialized

    def device(self, index):
        device_ctx = getattr(self._module, "device", None)
        if device_ctx is not None:
            return device_ctx(index)
        return torch.accelerator.device_index(index)


def _checkpoint_fixed() -> bool:
    import torch.utils.checkpoint as cp

    # Read torch's compiled code, not its text (comments may quote the old calls): the
    # fix stops looking up the CUDA-private "_initialized" flag in the forward and the
    # `device_module.device(idx)` context manager when stashing states.
    forward_consts = cp.CheckpointFunction.forward.__code__.co_consts
    stash_names = cp.get_device_states.__code__.co_names
    return "_initialized" not in forward_consts and "device" not in stash_names


def _apply_checkpoint() -> None:
    import torch.utils.checkpoint as cp

    original = cp._get_device_module

    @functools.wraps(original)
    def _get_device_module(device="cuda"):
        module = original(device)
        return _CheckpointDeviceModule(module) if device == _backend_name() else module

    cp._get_device_module = _get_device_module


# --- 0002 (F02): GradScaler / ShardedGradScaler default device ---------------------------


def _defaults_to_cuda(cls) -> bool:
    return inspect.signature(cls.__init__).parameters["device"].default == "cuda"


def _grad_scaler_fixed() -> bool:
    return not _defaults_to_cuda(torch.amp.GradScaler)


def _default_to_backend(cls) -> None:
    """Make ``cls(...)`` without ``device`` scale on the neuron backend when it is the accelerator."""
    original = cls.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if "device" not in signature.bind_partial(self, *args, **kwargs).arguments:
            acc = torch.accelerator.current_accelerator(check_available=True)
            if acc is not None and acc.type == _backend_name():
                kwargs["device"] = acc.type
                _warn_once("0002")
        original(self, *args, **kwargs)

    cls.__init__ = __init__


_SHARDED_SCALER_MODULE = "torch.distributed.fsdp.sharded_grad_scaler"


class _PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Patches ShardedGradScaler when its module is first imported: importing FSDP
    eagerly would add half a second to every ``import torch``."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _SHARDED_SCALER_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None:
            self._loader = spec.loader
            spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        if _defaults_to_cuda(module.ShardedGradScaler):
            _default_to_backend(module.ShardedGradScaler)


def _apply_grad_scaler() -> None:
    _default_to_backend(torch.amp.GradScaler)
    sharded = sys.modules.get(_SHARDED_SCALER_MODULE)
    if sharded is not None:
        if _defaults_to_cuda(sharded.ShardedGradScaler):
            _default_to_backend(sharded.ShardedGradScaler)
    else:
        sys.meta_path.insert(0, _PatchOnImport())


# --- 0014 (tied weights): Module.to keeps Parameter identity ----------------------------
# ``Module._apply`` keeps a Parameter object only when
# ``torch._has_compatible_shallow_copy_type(old, new)`` holds; in torch 2.13 the C++ check
# (``TensorImpl::has_compatible_shallow_copy_type``) lists CPU, CUDA, MPS, HIP, XPU, HPU and
# MTIA but not PrivateUse1, so moving a module to or from neuron replaces every Parameter.
# torch leaves PrivateUse1 backends to register ``aten::_has_compatible_shallow_copy_type``,
# and torch_neuron's C++ library does (csrc/aten/Minimal.cpp), so the check below finds the fix
# on the stock wheel and this wrapper stays uninstalled. It remains for a build of the library
# without that kernel: ``_apply`` is wrapped, and after the stock conversion each replaced
# Parameter's contents are swapped into the original object (``torch.utils.swap_tensors``).
_apply_state = threading.local()
_original_module_apply = torch.nn.Module._apply


def _shallow_copy_fixed() -> bool:
    return torch._has_compatible_shallow_copy_type(torch.empty(1), torch.empty(1, device=_backend_name()))


def _crosses_backend(old: torch.Tensor, new: torch.Tensor) -> bool:
    name = _backend_name()
    return old.device.type != new.device.type and name in (old.device.type, new.device.type)


def _restore_parameters(owners: dict) -> None:
    for old, places in owners.values():
        replaced = [(m, n, m._parameters.get(n)) for m, n in places]
        first_new = next((p for _, _, p in replaced if p is not None and p is not old), None)
        if first_new is None or not _crosses_backend(old, first_new):
            continue
        keep = old
        # swap_tensors swaps classes too; Module.to keeps a Parameter's class where torch keeps the
        # object (set_data), which is what keeps a lazy module's UninitializedParameter lazy.
        cls = type(old)
        try:
            torch.utils.swap_tensors(old, first_new)
            if type(old) is not cls:
                old.__class__ = cls
        except RuntimeError as e:
            warnings.warn(
                f"torch_neuron: could not keep the identity of a Parameter moved to/from neuron ({e}); "
                "tied parameters stay tied but the Parameter objects are new.", stacklevel=3)
            keep = first_new
        for module, name, _ in replaced:
            module._parameters[name] = keep


def _module_apply(self, fn, recurse: bool = True):
    if getattr(_apply_state, "active", False) or torch.__future__.get_swap_module_params_on_conversion():
        return _original_module_apply(self, fn, recurse)
    owners: dict = {}
    for module in (self.modules() if recurse else [self]):
        for name, p in module._parameters.items():
            if p is not None:
                owners.setdefault(id(p), (p, []))[1].append((module, name))
    _apply_state.active = True
    try:
        _original_module_apply(self, fn, recurse)
    finally:
        _apply_state.active = False
    _restore_parameters(owners)
    return self


def _apply_module_identity() -> None:
    if torch.nn.Module._apply is _original_module_apply:
        torch.nn.Module._apply = _module_apply


_WORKAROUNDS = (
    Workaround(
        "0001",
        "F01",
        "torch.utils.checkpoint now stashes and replays the neuron RNG state "
        "(vanilla torch only does so for devices with CUDA-style `_initialized`/`device()`)",
        _checkpoint_fixed,
        _apply_checkpoint,
    ),
    Workaround(
        "0002",
        "F02",
        "GradScaler()/ShardedGradScaler() without a device now scale on neuron "
        "(vanilla torch defaults them to 'cuda' and disables scaling)",
        _grad_scaler_fixed,
        _apply_grad_scaler,
    ),
    Workaround(
        "0014",
        "tied weights",
        "Module.to('neuron') keeps Parameter objects, so tied weights stay tied "
        "(vanilla torch replaces every Parameter of a PrivateUse1 module)",
        _shallow_copy_fixed,
        _apply_module_identity,
    ),
)
_BY_ID = {w.patch_id: w for w in _WORKAROUNDS}


def install() -> dict[str, str]:
    """Install the workarounds the running torch needs; returns patch id -> status.

    Called once by ``torch_neuron`` after the backend is registered; later calls
    return the first call's result.
    """
    if _status:
        return dict(_status)
    disabled = _env.get_bool(DISABLE_ENV)
    for w in _WORKAROUNDS:
        if disabled:
            _status[w.patch_id] = "disabled"
        elif w.fixed_in_torch():
            _status[w.patch_id] = "not needed"
        else:
            w.apply()
            _status[w.patch_id] = "applied"
        logger.info("workaround %s (%s): %s", w.patch_id, w.finding, _status[w.patch_id])
    return dict(_status)


def status() -> dict[str, str]:
    """Patch id -> "applied" | "not needed" | "disabled"; empty before :func:`install`."""
    return dict(_status)
