"""Building blocks of generated inputs: the case's sizes, config lookups, token ids and layout
boxes, shared by the generic rules (case.py) and the per-architecture completions
(arch_inputs.py)."""
from __future__ import annotations

import torch

from . import tiny_config

BATCH = 2
SEQ = 8
DEC_SEQ = 6
AUDIO_SAMPLES = 3200


# Vision towers of Qwen-VL-style models take flattened patches and each image's (t, h, w) grid.
GRID = (1, 4, 4)


class CaseUnsupported(Exception):
    """The harness cannot generate inputs for this architecture (status input_unsupported)."""


def first(cfg, *names, default=None):
    """An attribute of the config or of its first sub-config that has it."""
    for name in names:
        try:
            v = getattr(cfg, name, None)
        except Exception:  # noqa: BLE001 - per-layer attributes refuse a global read
            v = None
        if v is not None:
            return v
    for _, child in tiny_config._children(cfg):
        v = first(child, *names)
        if v is not None:
            return v
    return default


def size_pair(v):
    if isinstance(v, (list, tuple)):
        return int(v[0]), int(v[-1])
    return int(v), int(v)


def token_ids(cfg, shape, g):
    vocab = first(cfg, "vocab_size", default=tiny_config.VOCAB)
    hi = min(vocab, tiny_config.SPECIAL_BASE)
    allowed = torch.tensor([i for i in range(hi) if i not in tiny_config.special_ids(cfg)])
    if len(allowed) < 4:
        raise CaseUnsupported(f"vocabulary of {vocab} leaves no ordinary token ids")
    return allowed[torch.randint(0, len(allowed), shape, generator=g)]


def boxes(cfg, g):
    """Layout boxes (x0, y0, x1, y1) per token, inside the 2-D position tables."""
    top = int(first(cfg, "max_2d_position_embeddings", default=1024)) - 1
    # Two random points per token, sorted per coordinate: the box's low and high corners.
    lo, hi = torch.randint(0, top + 1, (BATCH, SEQ, 2, 2), generator=g).sort(dim=2).values.unbind(2)
    (x0, y0), (x1, y1) = lo.unbind(-1), hi.unbind(-1)
    if first(cfg, "dim_bbox", default=4) == 8:  # BROS: the four corners of the box
        return torch.stack([x0, y0, x1, y0, x1, y1, x0, y1], -1)
    return torch.stack([x0, y0, x1, y1], -1)


def channels(cfg):
    return int(first(cfg, "in_channels", "num_channels", default=3))
