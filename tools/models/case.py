"""One architecture as a training case: a tiny model with a training head, valid inputs and a loss.

The head is the first of seq2seq LM, causal LM, masked LM, sequence / image / audio
classification that transformers registers for the architecture and whose main input we can
generate; otherwise the base model, trained on a seeded random projection of every floating
output to a scalar (a plain sum would have vanishing gradients after a final norm).

Inputs are generated from the forward signature and the config; ARCH_INPUTS completes them for
architectures whose processors produce inputs that the signature marks optional but the model
needs, or in a layout the generic rules do not derive.
"""
from __future__ import annotations

import dataclasses
import inspect

import torch

from . import tiny_config
from .arch_inputs import ARCH_INPUTS
from .primitives import (AUDIO_SAMPLES, BATCH, DEC_SEQ, GRID, SEQ, CaseUnsupported, boxes, channels, first,
                         size_pair, token_ids)


class TinyConfigError(Exception):
    """No tiny configuration builds (status no_tiny_config)."""


HEADS = (
    ("seq2seq_lm", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
    ("causal_lm", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"),
    ("masked_lm", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"),
    ("sequence_classification", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    ("image_classification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"),
    ("audio_classification", "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"),
)
# Inputs that are already embedded: (batch, sequence, width); latents are (batch, width, frames).
EMBEDDED = ("inputs_embeds", "query_embeds", "noise_embeds", "context_hidden_states", "latents")
MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features", "pixel_values_videos",
               "past_values", "inputs", "audio_mel", "states", *EMBEDDED)
# Keypoint matchers take a pair of images per example: (batch, 2, channels, height, width).
IMAGE_PAIRS = ("EfficientLoFTRConfig", "LightGlueConfig")
# Offline-RL trajectories (Decision Transformer): per-step features and the config's width of each.
TRAJECTORY = {"states": "state_dim", "actions": "act_dim", "rewards": None, "returns_to_go": None}
# Masks whose True marks padding rather than valid positions (Gemma3n's audio encoder).
PADDING_MASKS = ("audio_mel_mask",)
# Vision towers of Qwen-VL-style models take flattened patches and each image's (t, h, w) grid (GRID).
GRIDS = ("grid_thw", "image_grid_thw")
HEAD_INPUT = {"seq2seq_lm": ("input_ids", "input_features"), "causal_lm": ("input_ids",),
              "masked_lm": ("input_ids",), "sequence_classification": ("input_ids",),
              "image_classification": ("pixel_values",),
              "audio_classification": ("input_values", "input_features")}


def architectures() -> list[str]:
    """Every model type with a base model in transformers' MODEL_MAPPING_NAMES, sorted."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    return sorted(MODEL_MAPPING_NAMES)


def _class(name):
    import transformers
    if isinstance(name, (list, tuple)):
        name = name[0]
    return getattr(transformers, name, None)


def candidates(model_type: str):
    """(head, model class) pairs in order of preference, ending with the base model."""
    import transformers.models.auto.modeling_auto as auto
    out = []
    for head, mapping in HEADS:
        name = getattr(auto, mapping).get(model_type)
        cls = _class(name) if name else None
        if cls is not None:
            out.append((head, cls))
    base = _class(auto.MODEL_MAPPING_NAMES[model_type])
    if base is not None:
        out.append(("base", base))
    return out


def _params(fn):
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


@dataclasses.dataclass
class Case:
    model_type: str
    head: str
    cls_name: str
    config: object
    rung: int
    inputs: dict

    def build(self, seed: int = 0):
        torch.manual_seed(seed)
        cls = _class(self.cls_name)
        return cls._from_config(tiny_config.clone(self.config)).train()

    def parameter_count(self) -> int:
        """Parameters of the model, counted on the meta device (no memory, no init)."""
        with torch.device("meta"):
            model = _class(self.cls_name)._from_config(tiny_config.clone(self.config))
        return sum(p.numel() for p in model.parameters())




# The optional inputs of another modality that the second layout adds (text with images, images
# with a text prompt, text with audio, text with layout boxes).
COMPANIONS = ("input_ids", "pixel_values", "input_features", "bbox", "encoder_hidden_states")


def _companions(cls, main):
    params = _params(cls.forward)
    return [n for n in COMPANIONS if n != main and n in params]


def has_second_layout(cls) -> bool:
    """Whether a second input layout exists: (batch, channels, samples) waveforms, or several modalities."""
    main = getattr(cls, "main_input_name", "input_ids")
    params = _params(cls.forward)
    return "input_values" in params or any(n in params for n in GRIDS) or bool(_companions(cls, main))


def _companion(name, cls, cfg, g):
    if name == "bbox":
        return boxes(cfg, g)
    if name == "encoder_hidden_states":  # what a cross-attending stack (Q-Former) attends to
        width = int(first(cfg, "encoder_hidden_size", "hidden_size", default=32))
        return torch.randn(BATCH, SEQ, width, generator=g)
    return _generate(name, cls, cfg, g)


def _generate(name, cls, cfg, g, layout=0):
    if name == "input_ids":
        return token_ids(cfg, (BATCH, SEQ), g)
    if name == "pixel_values":
        h, w = size_pair(first(cfg, "image_size", "img_size", "input_size", default=32))
        c = first(cfg, "num_channels", "in_channels", "in_chans", default=3)
        # Video models: the second layout also reads a sub-config's frame count (X-CLIP's vision tower).
        frames = vars(cfg).get("num_frames") if layout == 0 else first(cfg, "num_frames")
        if type(cfg).__name__ in IMAGE_PAIRS:
            frames = 2
        if isinstance(frames, int):
            return torch.randn(BATCH, int(frames or 2), int(c), h, w, generator=g)  # video models
        return torch.randn(BATCH, int(c), h, w, generator=g)
    if name == "past_values":
        # Time series: context plus the largest lag, one column per input channel.
        context = first(cfg, "context_length", default=None) or first(cfg, "prediction_length", default=None) or 16
        length = int(context) + max(first(cfg, "lags_sequence", default=[0]) or [0])
        if "num_input_channels" in vars(cfg):
            return torch.randn(BATCH, length, int(cfg.num_input_channels), generator=g)
        channels = int(first(cfg, "input_size", default=1))
        return torch.randn(BATCH, length, channels, generator=g) if channels > 1 else torch.randn(BATCH, length, generator=g)
    if name in TRAJECTORY:
        return torch.randn(BATCH, SEQ, int(first(cfg, TRAJECTORY[name], default=1)), generator=g)
    if name in EMBEDDED:
        width = int(first(cfg, "hidden_size", "d_model", default=32))
        shape = (BATCH, width, SEQ) if name == "latents" else (BATCH, SEQ, width)
        return torch.randn(*shape, generator=g)
    if name == "audio_mel":
        return torch.randn(BATCH, 32, int(first(cfg, "input_feat_size", "num_mel_bins", default=16)), generator=g)
    if name == "inputs":
        return torch.randn(BATCH, SEQ, int(first(cfg, "d_model", "hidden_size", default=32)), generator=g)
    if name == "pixel_values_videos":
        h, w = size_pair(first(cfg, "image_size", "img_size", default=32))
        c = first(cfg, "num_channels", "in_channels", default=3)
        frames = first(cfg, "num_frames", default=2)
        return torch.randn(BATCH, int(frames), int(c), h, w, generator=g)
    if name == "input_values":
        # Waveforms: (batch, samples), or (batch, channels, samples) for codecs and some encoders.
        channels = first(cfg, "audio_channels", default=None)
        samples = AUDIO_SAMPLES
        hop = first(cfg, "samples_per_token", default=None)
        if isinstance(hop, int) and hop > 0:
            # Tokenizing encoders whose feature extractor pads to whole tokens (MuseSpark: 1920).
            samples = -(-AUDIO_SAMPLES // hop) * hop
        if layout == 1 or isinstance(channels, int) and channels > 1:
            return torch.randn(BATCH, int(channels or 1), samples, generator=g)
        return torch.randn(BATCH, samples, generator=g)
    mels = first(cfg, "num_mel_bins", default=None)
    src = first(cfg, "max_source_positions", default=None)
    per_channel = first(cfg, "input_feat_per_channel", "feature_projection_input_dim", default=None)
    if per_channel is not None:
        return torch.randn(BATCH, 32, int(per_channel) * int(first(cfg, "input_channels", default=1)), generator=g)
    if mels is not None and first(cfg, "subsampling_conv_channels", "subsampling_factor", default=None) is not None:
        # FastConformer-style encoders (Parakeet, Canary, ...) take (batch, frames, mel bins).
        return torch.randn(BATCH, 32, int(mels), generator=g)
    if mels is not None and src is not None:
        return torch.randn(BATCH, int(mels), 2 * int(src), generator=g)
    if mels is not None:
        return torch.randn(BATCH, int(mels), 32, generator=g)
    feat = first(cfg, "feature_size", default=None)
    if feat is None:
        raise CaseUnsupported(f"{cls.__name__}: no feature size for input_features")
    return torch.randn(BATCH, 32, int(feat), generator=g)


def _trajectory(x, params, cfg, g):
    for name, width in TRAJECTORY.items():
        if name in params:
            x[name] = torch.randn(BATCH, SEQ, int(first(cfg, width, default=1)) if width else 1, generator=g)
    if "timesteps" in params:
        x["timesteps"] = torch.arange(SEQ).repeat(BATCH, 1)
    if "attention_mask" in params:
        x["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)


def _flat_patches(x, grid_name, required, cfg, g, layout):
    """Qwen-VL-style vision towers: every image's patches flattened into rows, with its (t, h, w) grid.

    Without a temporal_patch_size in the config, a patch spans two frames (Qwen's default) in the
    first layout and one in the second.
    """
    patch = int(first(cfg, "patch_size", default=14))
    temporal = int(first(cfg, "temporal_patch_size", default=2 if layout == 0 else 1))
    if "merge_sizes" in required:
        temporal = 1
    grid = torch.tensor([GRID] * BATCH)
    x[grid_name] = grid
    patches = torch.randn(int(grid.prod(-1).sum()), channels(cfg) * temporal * patch ** 2, generator=g)
    x["pixel_values" if "pixel_values" in required else "hidden_states"] = patches
    if "merge_sizes" in required:
        x["merge_sizes"] = torch.full((BATCH,), int(first(cfg, "spatial_merge_size", default=1)))


def _patch_sequence(x, cfg, g):
    """SigLIP2-style (NaFlex) vision inputs: patch rows, each image's patch grid and a patch mask."""
    patch = int(first(cfg, "patch_size", default=16))
    h, w = GRID[1:]
    x["pixel_values"] = torch.randn(BATCH, h * w, channels(cfg) * patch ** 2, generator=g)
    x["spatial_shapes"] = torch.tensor([[h, w]] * BATCH)
    mask = torch.ones(BATCH, h * w, dtype=torch.long)
    mask[1, -2:] = 0  # the second image padded by two patches
    x["pixel_attention_mask"] = mask


def _frames_of(value, cfg):
    """The length of the time (or sequence) axis of a generated input."""
    mels = first(cfg, "num_mel_bins", "feature_size", default=None)
    if value.dim() == 3 and isinstance(mels, int) and value.shape[1] == mels:
        return value.shape[2]  # (batch, mel bins, frames)
    return value.shape[1]


def _required_extras(x, required, cfg, g):
    """Required companions of the main input: a second text stream (Q-Former), a prompt image and
    mask (SegGPT), a time series' frequency class, padding (all valid) and masks."""
    if "qformer_input_ids" in required:
        x["qformer_input_ids"] = token_ids(cfg, (BATCH, SEQ), g)
        x["qformer_attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    image = x.get("pixel_values")
    if isinstance(image, torch.Tensor) and image.dim() == 4:
        for name in ("prompt_pixel_values", "prompt_masks"):
            if name in required:
                x[name] = torch.randn(image.shape, generator=g)
    if "freq" in required:
        x["freq"] = torch.zeros(BATCH, dtype=torch.long)
    for name in sorted(required - set(x)):
        if name.endswith("_padding") and name[:-len("_padding")] in x:
            x[name] = torch.zeros(x[name[:-len("_padding")]].shape[:2], dtype=torch.long)
            continue
        base = name[:-len("_mask")] if name.endswith("_mask") else None
        if base in x and isinstance(x[base], torch.Tensor):
            frames = _frames_of(x[base], cfg)
            if name in PADDING_MASKS:
                x[name] = torch.zeros(BATCH, frames, dtype=torch.bool)
            else:
                x[name] = torch.ones(BATCH, frames, dtype=torch.long)


def make_inputs(model_type, head, cls, cfg, g, layout=0) -> dict:
    """Valid inputs for ``cls`` (with labels for a head); raises CaseUnsupported."""
    params = _params(cls.forward)
    main = getattr(cls, "main_input_name", "input_ids")
    if isinstance(main, (list, tuple)):
        main = main[0]  # several main inputs (OneFormer's image and task): the first is the primary one
    if main not in MAIN_INPUTS and model_type not in ARCH_INPUTS:
        raise CaseUnsupported(f"main input {main!r} of {cls.__name__} has no generator")
    if head != "base" and main not in HEAD_INPUT[head]:
        raise CaseUnsupported(f"head {head} with main input {main}")
    required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    x: dict = {}
    for name in MAIN_INPUTS:
        if name == main or (name in required and name in params):
            try:
                x[name] = _generate(name, cls, cfg, g, layout)
            except CaseUnsupported:
                if model_type not in ARCH_INPUTS:  # else the architecture's own entry provides it
                    raise
    if layout == 1 and main != "input_values":
        # Dual encoders (CLIP-like) and prompted models need both modalities; this layout is tried
        # when the main input alone fails.
        for name in _companions(cls, main):
            if name not in x:
                x[name] = _companion(name, cls, cfg, g)
    if main in TRAJECTORY:
        _trajectory(x, params, cfg, g)
    grid_name = next((n for n in GRIDS if n in required), None)
    if grid_name:
        _flat_patches(x, grid_name, required, cfg, g, layout)
    if "spatial_shapes" in params and "pixel_values" in x:
        _patch_sequence(x, cfg, g)
    _required_extras(x, required, cfg, g)
    if "past_values" in x:
        pv = x["past_values"]
        if "past_observed_mask" in params:
            x["past_observed_mask"] = torch.ones_like(pv)
        n_time = first(cfg, "num_time_features", default=None)
        if "past_time_features" in params and isinstance(n_time, int):
            x["past_time_features"] = torch.randn(BATCH, pv.shape[1], n_time, generator=g)
        if "future_values" in params and isinstance(vars(cfg).get("prediction_length"), int):
            fut = int(cfg.prediction_length)
            x["future_values"] = torch.randn(BATCH, fut, *pv.shape[2:], generator=g)
            if "future_time_features" in params and isinstance(n_time, int):
                x["future_time_features"] = torch.randn(BATCH, fut, n_time, generator=g)
    if "input_ids" in x and "attention_mask" in params:
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        mask[1, -2:] = 0  # a padded row: masks are not all ones
        x["attention_mask"] = mask
    if model_type in ARCH_INPUTS:
        ARCH_INPUTS[model_type](x, cfg, g)
    enc_dec = bool(getattr(cfg, "is_encoder_decoder", False))
    if head == "seq2seq_lm":
        x["labels"] = token_ids(cfg, (BATCH, DEC_SEQ), g)
    elif head in ("causal_lm",):
        x["labels"] = x["input_ids"].clone()
    elif head == "masked_lm":
        labels = x["input_ids"].clone()
        labels[:, ::2] = -100
        x["labels"] = labels
    elif head.endswith("classification"):
        x["labels"] = torch.randint(0, 3, (BATCH,), generator=g)
    elif enc_dec and "decoder_input_ids" in params and "decoder_input_ids" not in x:
        x["decoder_input_ids"] = token_ids(cfg, (BATCH, DEC_SEQ), g)
    missing = [n for n, p in params.items()
               if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and n not in x and n != "self"]
    if missing:
        raise CaseUnsupported(f"{cls.__name__}.forward requires {', '.join(missing)}")
    if "use_cache" in params:
        x["use_cache"] = False
    if "return_dict" in params:
        x["return_dict"] = True
    return x


def _floating_outputs(value, out, seen):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.requires_grad and id(value) not in seen:
            seen.add(id(value))
            out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _floating_outputs(v, out, seen)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _floating_outputs(v, out, seen)
    return out


def loss_of(head, output):
    """The training loss: the head's own loss, else a seeded random projection of every output."""
    if head != "base":
        loss = getattr(output, "loss", None)
        if loss is None and isinstance(output, dict):
            loss = output.get("loss")
        if isinstance(loss, torch.Tensor):
            return loss
    tensors = _floating_outputs(dict(output) if isinstance(output, dict) else output, [], set())
    if not tensors:
        raise CaseUnsupported("the model returns no floating output that requires grad")
    total = None
    for i, t in enumerate(tensors):
        g = torch.Generator().manual_seed(1000 + i)
        proj = torch.randn(t.shape, generator=g).to(t.device)
        term = (t.float() * proj).sum() / max(t.numel(), 1) ** 0.5
        total = term if total is None else total + term
    return total


def to_device(inputs, device):
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
