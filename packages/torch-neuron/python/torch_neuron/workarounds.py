# Copyright (c) the torch-neuron authors. Licensed under the Apache License, Version 2.0.
"""Runtime workarounds for torch bugs that silently give wrong results on ``neuron``.

Each workaround is keyed to the patch in ``patches/`` that fixes torch itself. It is
installed only when the running torch lacks that fix (checked on torch's own code, not
its version string), and it warns once, the first time it changes behaviour.

``TORCH_NEURON_DISABLE_WORKAROUNDS=1`` installs none of them; the patch proof tests
(``python -m tools.patches matrix``) run that way to show the unpatched behaviour.

| patch | finding | what breaks on vanilla torch 2.13.0 |
|-------|---------|--------------------------------------|
| 0001  | F01     | ``torch.utils.checkpoint`` does not replay the neuron RNG: wrong gradients with dropout |
| 0002  | F02     | ``GradScaler()`` / ``ShardedGradScaler()`` default to CUDA and disable loss scaling |
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import logging
import sys
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
