"""Whose failure is a CPU failure: the model's, or the harness's shrunken config and inputs.

A CPU failure of the tiny case counts as the model's own (status cpu_fail) only when the same
training step with the architecture's default config fails the same way: the same exception type
raised at the same line of transformers or torch. The default config describes a released
checkpoint (up to billions of parameters), so the step runs on the meta device: shapes and
argument checks are evaluated, no memory is allocated and no arithmetic is done. A failure that
does not reproduce (the default config trains on meta, or fails elsewhere, including meta-only
failures such as data-dependent `.item()`) is charged to the harness (no_tiny_config), so doubt
counts against the harness's skip share, never in its favour.

The same test decides a failure at construction: the model's own when the default config's model
fails to build the same way (default_build).
"""
from __future__ import annotations

import torch

from . import case as case_mod
from . import tiny_config


def default_config(model_type: str):
    """The architecture's own default config, with only the harness's non-size settings applied."""
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(model_type)
    if "prediction_length" in vars(cfg) and cfg.prediction_length is None:
        # Time-series configs have no default horizon; the tiny ones use the same values.
        cfg = AutoConfig.for_model(model_type, prediction_length=4, context_length=8)
    if tiny_config._get(cfg, "use_timm_backbone"):
        tiny_config._set(cfg, "use_timm_backbone", False)
        tiny_config._set(cfg, "use_pretrained_backbone", False)
    tiny_config._set(cfg, "num_labels", 3)
    return cfg


def default_step(model_type: str, head: str, cls, layout: int):
    """Forward with loss and backward of ``cls`` at the default config on meta; the exception or None."""
    try:
        cfg = default_config(model_type)
        inputs = case_mod.make_inputs(model_type, head, cls, cfg, torch.Generator().manual_seed(0), layout)
        with torch.device("meta"):
            model = cls._from_config(cfg).train()
        x = case_mod.to_device(inputs, torch.device("meta"))
        loss = case_mod.loss_of(head, model(**x))
        loss.backward()
    except Exception as e:  # noqa: BLE001 - the caller compares it with the tiny case's failure
        return e
    return None


def default_build(cls, model_type: str):
    """Construction of ``cls`` at the default config on meta; the exception or None."""
    try:
        with torch.device("meta"):
            cls._from_config(default_config(model_type))
    except Exception as e:  # noqa: BLE001 - the caller compares it with the tiny build's failure
        return e
    return None


def same_failure(tiny_exc: BaseException, default_exc: BaseException | None, where) -> bool:
    return (default_exc is not None and type(default_exc) is type(tiny_exc)
            and where(default_exc) == where(tiny_exc))
