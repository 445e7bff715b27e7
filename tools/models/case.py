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

BATCH = 2
SEQ = 8
DEC_SEQ = 6
AUDIO_SAMPLES = 3200


class CaseUnsupported(Exception):
    """The harness cannot generate inputs for this architecture (status input_unsupported)."""


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
# Vision towers of Qwen-VL-style models take flattened patches and each image's (t, h, w) grid.
GRID = (1, 4, 4)
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


def _first(cfg, *names, default=None):
    """An attribute of the config or of its first sub-config that has it."""
    for name in names:
        try:
            v = getattr(cfg, name, None)
        except Exception:  # noqa: BLE001 - per-layer attributes refuse a global read
            v = None
        if v is not None:
            return v
    for _, child in tiny_config._children(cfg):
        v = _first(child, *names)
        if v is not None:
            return v
    return default


def _size(v):
    if isinstance(v, (list, tuple)):
        return int(v[0]), int(v[-1])
    return int(v), int(v)


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


def _token_ids(cfg, shape, g):
    vocab = _first(cfg, "vocab_size", default=tiny_config.VOCAB)
    hi = min(vocab, tiny_config.SPECIAL_BASE)
    allowed = torch.tensor([i for i in range(hi) if i not in tiny_config.special_ids(cfg)])
    if len(allowed) < 4:
        raise CaseUnsupported(f"vocabulary of {vocab} leaves no ordinary token ids")
    return allowed[torch.randint(0, len(allowed), shape, generator=g)]


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
        return _boxes(cfg, g)
    if name == "encoder_hidden_states":  # what a cross-attending stack (Q-Former) attends to
        width = int(_first(cfg, "encoder_hidden_size", "hidden_size", default=32))
        return torch.randn(BATCH, SEQ, width, generator=g)
    return _generate(name, cls, cfg, g)


def _boxes(cfg, g):
    """Layout boxes (x0, y0, x1, y1) per token, inside the 2-D position tables."""
    top = int(_first(cfg, "max_2d_position_embeddings", default=1024)) - 1
    # Two random points per token, sorted per coordinate: the box's low and high corners.
    lo, hi = torch.randint(0, top + 1, (BATCH, SEQ, 2, 2), generator=g).sort(dim=2).values.unbind(2)
    (x0, y0), (x1, y1) = lo.unbind(-1), hi.unbind(-1)
    if _first(cfg, "dim_bbox", default=4) == 8:  # BROS: the four corners of the box
        return torch.stack([x0, y0, x1, y0, x1, y1, x0, y1], -1)
    return torch.stack([x0, y0, x1, y1], -1)


def _generate(name, cls, cfg, g, layout=0):
    if name == "input_ids":
        return _token_ids(cfg, (BATCH, SEQ), g)
    if name == "pixel_values":
        h, w = _size(_first(cfg, "image_size", "img_size", "input_size", default=32))
        c = _first(cfg, "num_channels", "in_channels", "in_chans", default=3)
        # Video models: the second layout also reads a sub-config's frame count (X-CLIP's vision tower).
        frames = vars(cfg).get("num_frames") if layout == 0 else _first(cfg, "num_frames")
        if type(cfg).__name__ in IMAGE_PAIRS:
            frames = 2
        if isinstance(frames, int):
            return torch.randn(BATCH, int(frames or 2), int(c), h, w, generator=g)  # video models
        return torch.randn(BATCH, int(c), h, w, generator=g)
    if name == "past_values":
        # Time series: context plus the largest lag, one column per input channel.
        context = _first(cfg, "context_length", default=None) or _first(cfg, "prediction_length", default=None) or 16
        length = int(context) + max(_first(cfg, "lags_sequence", default=[0]) or [0])
        if "num_input_channels" in vars(cfg):
            return torch.randn(BATCH, length, int(cfg.num_input_channels), generator=g)
        channels = int(_first(cfg, "input_size", default=1))
        return torch.randn(BATCH, length, channels, generator=g) if channels > 1 else torch.randn(BATCH, length, generator=g)
    if name in TRAJECTORY:
        return torch.randn(BATCH, SEQ, int(_first(cfg, TRAJECTORY[name], default=1)), generator=g)
    if name in EMBEDDED:
        width = int(_first(cfg, "hidden_size", "d_model", default=32))
        shape = (BATCH, width, SEQ) if name == "latents" else (BATCH, SEQ, width)
        return torch.randn(*shape, generator=g)
    if name == "audio_mel":
        return torch.randn(BATCH, 32, int(_first(cfg, "input_feat_size", "num_mel_bins", default=16)), generator=g)
    if name == "inputs":
        return torch.randn(BATCH, SEQ, int(_first(cfg, "d_model", "hidden_size", default=32)), generator=g)
    if name == "pixel_values_videos":
        h, w = _size(_first(cfg, "image_size", "img_size", default=32))
        c = _first(cfg, "num_channels", "in_channels", default=3)
        frames = _first(cfg, "num_frames", default=2)
        return torch.randn(BATCH, int(frames), int(c), h, w, generator=g)
    if name == "input_values":
        # Waveforms: (batch, samples), or (batch, channels, samples) for codecs and some encoders.
        channels = _first(cfg, "audio_channels", default=None)
        samples = AUDIO_SAMPLES
        hop = _first(cfg, "samples_per_token", default=None)
        if isinstance(hop, int) and hop > 0:
            # Tokenizing encoders whose feature extractor pads to whole tokens (MuseSpark: 1920).
            samples = -(-AUDIO_SAMPLES // hop) * hop
        if layout == 1 or isinstance(channels, int) and channels > 1:
            return torch.randn(BATCH, int(channels or 1), samples, generator=g)
        return torch.randn(BATCH, samples, generator=g)
    mels = _first(cfg, "num_mel_bins", default=None)
    src = _first(cfg, "max_source_positions", default=None)
    per_channel = _first(cfg, "input_feat_per_channel", "feature_projection_input_dim", default=None)
    if per_channel is not None:
        return torch.randn(BATCH, 32, int(per_channel) * int(_first(cfg, "input_channels", default=1)), generator=g)
    if mels is not None and _first(cfg, "subsampling_conv_channels", "subsampling_factor", default=None) is not None:
        # FastConformer-style encoders (Parakeet, Canary, ...) take (batch, frames, mel bins).
        return torch.randn(BATCH, 32, int(mels), generator=g)
    if mels is not None and src is not None:
        return torch.randn(BATCH, int(mels), 2 * int(src), generator=g)
    if mels is not None:
        return torch.randn(BATCH, int(mels), 32, generator=g)
    feat = _first(cfg, "feature_size", default=None)
    if feat is None:
        raise CaseUnsupported(f"{cls.__name__}: no feature size for input_features")
    return torch.randn(BATCH, 32, int(feat), generator=g)


def _channels(cfg):
    return int(_first(cfg, "in_channels", "num_channels", default=3))


def _trajectory(x, params, cfg, g):
    for name, width in TRAJECTORY.items():
        if name in params:
            x[name] = torch.randn(BATCH, SEQ, int(_first(cfg, width, default=1)) if width else 1, generator=g)
    if "timesteps" in params:
        x["timesteps"] = torch.arange(SEQ).repeat(BATCH, 1)
    if "attention_mask" in params:
        x["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)


def _flat_patches(x, grid_name, required, cfg, g, layout):
    """Qwen-VL-style vision towers: every image's patches flattened into rows, with its (t, h, w) grid.

    Without a temporal_patch_size in the config, a patch spans two frames (Qwen's default) in the
    first layout and one in the second.
    """
    patch = int(_first(cfg, "patch_size", default=14))
    temporal = int(_first(cfg, "temporal_patch_size", default=2 if layout == 0 else 1))
    if "merge_sizes" in required:
        temporal = 1
    grid = torch.tensor([GRID] * BATCH)
    x[grid_name] = grid
    patches = torch.randn(int(grid.prod(-1).sum()), _channels(cfg) * temporal * patch ** 2, generator=g)
    x["pixel_values" if "pixel_values" in required else "hidden_states"] = patches
    if "merge_sizes" in required:
        x["merge_sizes"] = torch.full((BATCH,), int(_first(cfg, "spatial_merge_size", default=1)))


def _patch_sequence(x, cfg, g):
    """SigLIP2-style (NaFlex) vision inputs: patch rows, each image's patch grid and a patch mask."""
    patch = int(_first(cfg, "patch_size", default=16))
    h, w = GRID[1:]
    x["pixel_values"] = torch.randn(BATCH, h * w, _channels(cfg) * patch ** 2, generator=g)
    x["spatial_shapes"] = torch.tensor([[h, w]] * BATCH)
    mask = torch.ones(BATCH, h * w, dtype=torch.long)
    mask[1, -2:] = 0  # the second image padded by two patches
    x["pixel_attention_mask"] = mask


def _frames_of(value, cfg):
    """The length of the time (or sequence) axis of a generated input."""
    mels = _first(cfg, "num_mel_bins", "feature_size", default=None)
    if value.dim() == 3 and isinstance(mels, int) and value.shape[1] == mels:
        return value.shape[2]  # (batch, mel bins, frames)
    return value.shape[1]


def _required_extras(x, required, cfg, g):
    """Required companions of the main input: a second text stream (Q-Former), a prompt image and
    mask (SegGPT), a time series' frequency class, padding (all valid) and masks."""
    if "qformer_input_ids" in required:
        x["qformer_input_ids"] = _token_ids(cfg, (BATCH, SEQ), g)
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


def _bros(x, cfg, g):
    # BrosProcessor gives each token its box corners normalised to [0, 1] (floats, not pixels).
    x["bbox"] = _boxes(cfg, g).float() / (int(_first(cfg, "max_2d_position_embeddings", default=1024)) - 1)
    x.pop("encoder_hidden_states", None)


def _lxmert(x, cfg, g):
    # Region features and their normalised boxes from an object detector (36 regions per image
    # in the released pipeline; 4 here).
    x["visual_feats"] = torch.randn(BATCH, 4, int(cfg.visual_feat_dim), generator=g)
    x["visual_pos"] = torch.rand(BATCH, 4, int(cfg.visual_pos_dim), generator=g)


def _clap(x, cfg, g):
    # ClapFeatureExtractor: (batch, 1, frames, mel bins) log-mels, and which clips were longer than
    # the window (read when the fusion branch is on).
    audio = cfg.audio_config
    ratio = audio.spec_size // audio.num_mel_bins
    x["input_features"] = torch.randn(BATCH, 1, audio.spec_size * ratio, audio.num_mel_bins, generator=g)
    x["is_longer"] = torch.zeros(BATCH, 1, dtype=torch.bool)


def _idefics(x, cfg, g):
    # IdeficsProcessor: (batch, images, channels, height, width) and which images each token sees.
    image = x.pop("pixel_values", None)
    if image is None:
        h, w = _size(_first(cfg.vision_config, "image_size", default=32))
        image = torch.randn(BATCH, 3, h, w, generator=g)
    x["pixel_values"] = image.unsqueeze(1)
    x["image_attention_mask"] = torch.ones(BATCH, SEQ, 1, dtype=torch.long)


def _kosmos2(x, cfg, g):
    # Kosmos2Processor puts latent_query_num image-placeholder tokens after <s><image> and marks them.
    n = int(cfg.latent_query_num)
    ids = _token_ids(cfg, (BATCH, SEQ), g)
    x["input_ids"] = torch.cat([ids[:, :1], ids[:, 1:2].expand(BATCH, n), ids[:, 1:]], dim=1)
    mask = torch.zeros_like(x["input_ids"])
    mask[:, 1:1 + n] = 1
    x["image_embeds_position_mask"] = mask
    attention = torch.ones_like(x["input_ids"])
    attention[1, -2:] = 0
    x["attention_mask"] = attention
    h, w = _size(_first(cfg.vision_config, "image_size", default=32))
    x["pixel_values"] = torch.randn(BATCH, 3, h, w, generator=g)


def _fastspeech2(x, cfg, g):
    # Training needs the aligner's targets: two mel frames per token (none for padding), the
    # padded target spectrogram, and per-token pitch and energy.
    cfg = getattr(cfg, "model_config", cfg)
    mask = x.get("attention_mask", torch.ones(BATCH, SEQ, dtype=torch.long))
    x["duration_labels"] = 2 * mask
    frames = int(x["duration_labels"].sum(-1).max())
    x["spectrogram_labels"] = torch.randn(BATCH, frames, int(cfg.num_mel_bins), generator=g)
    x["pitch_labels"] = torch.randn(BATCH, SEQ, 1, generator=g)
    x["energy_labels"] = torch.randn(BATCH, SEQ, 1, generator=g)


def _mono(x, cfg, g):
    # Codecs that take (batch, 1, samples) mono waveforms.
    x["input_values"] = torch.randn(BATCH, 1, AUDIO_SAMPLES, generator=g)


def _xclip(x, cfg, g):
    # XCLIPProcessor: a clip of num_frames frames per video, with the text prompts.
    v = cfg.vision_config
    h, w = _size(v.image_size)
    x["pixel_values"] = torch.randn(BATCH, int(v.num_frames), int(v.num_channels), h, w, generator=g)
    if "input_ids" not in x:
        x["input_ids"] = _token_ids(cfg, (BATCH, SEQ), g)
        x["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
        x["attention_mask"][1, -2:] = 0


def _spectrogram(x, cfg, g):
    # ASTFeatureExtractor pads or truncates the filter bank to (batch, max_length, num_mel_bins).
    x["input_values"] = torch.randn(BATCH, int(cfg.max_length), int(cfg.num_mel_bins), generator=g)


def _tvp(x, cfg, g):
    # TvpProcessor: num_frames sampled frames per video, padded to max_img_size, with the text query.
    size = int(cfg.max_img_size)
    x["pixel_values"] = torch.randn(BATCH, int(cfg.num_frames), 3, size, size, generator=g)


def _voxtral_realtime(x, cfg, g):
    # The streaming processor aligns audio with text: each text token gets the embedding of
    # downsample_factor encoder frames, and the encoder's convolution halves the mel frames.
    frames = SEQ * int(cfg.downsample_factor) * 2
    x["input_features"] = torch.randn(BATCH, int(cfg.audio_config.num_mel_bins), frames, generator=g)
    x["num_delay_tokens"] = int(cfg.default_num_delay_tokens)


def _feature_mask(x, cfg, g):
    # The feature extractor's mask over mel frames (the second clip shorter by four frames).
    mask = torch.ones(BATCH, x["input_features"].shape[-1], dtype=torch.long)
    mask[1, -4:] = 0
    x["input_features_mask"] = mask


def _qwen3_asr(x, cfg, g):
    # Qwen3ASRFeatureExtractor pads the mel frames to whole attention windows of 2 * n_window.
    frames = 2 * int(cfg.n_window)
    x["input_features"] = torch.randn(BATCH, int(cfg.num_mel_bins), frames, generator=g)
    _feature_mask(x, cfg, g)


def _seggpt(x, cfg, g):
    # SegGptImageProcessor resizes the image, the prompt image and its mask to half the model's
    # height each; the model stacks prompt and image.
    h, w = _size(cfg.image_size)
    for name in ("pixel_values", "prompt_pixel_values", "prompt_masks"):
        x[name] = torch.randn(BATCH, int(cfg.num_channels), h // 2, w, generator=g)


def _query_placeholders(x, cfg, g, token, frames=0):
    # BLIP-2-style processors put num_query_tokens placeholders per image (per frame for video:
    # four frames per clip) ahead of the text.
    if frames:
        h, w = _size(cfg.vision_config.image_size)
        x["pixel_values"] = torch.randn(BATCH, frames, 3, h, w, generator=g)
    if "input_ids" not in x:
        x["input_ids"] = _token_ids(cfg, (BATCH, SEQ), g)
        x["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
        x["attention_mask"][1, -2:] = 0
    placeholders = torch.full((BATCH, max(frames, 1) * int(cfg.num_query_tokens)), int(token))
    x["input_ids"] = torch.cat([placeholders, x["input_ids"]], dim=1)
    x["attention_mask"] = torch.cat([torch.ones_like(placeholders), x["attention_mask"]], dim=1)


def _gemma4_vision(x, cfg, g):
    # Gemma4ImageProcessor: patch rows with their (x, y) grid positions, padded to max_patches with
    # (-1, -1); the pooler merges pooling_kernel_size ** 2 patches, so the grid is a multiple of it.
    k, patch = int(cfg.pooling_kernel_size), int(cfg.patch_size)
    side = 2 * k
    xs, ys = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="xy")
    positions = torch.stack([xs, ys], dim=-1).reshape(-1, 2)
    pad = k * k  # the second image is one pooled token shorter
    x["pixel_values"] = torch.randn(BATCH, side * side, 3 * patch * patch, generator=g)
    ids = positions.repeat(BATCH, 1, 1)
    ids[1, -pad:] = -1
    x["pixel_values"][1, -pad:] = 0
    x["pixel_position_ids"] = ids
    x.pop("input_ids", None)  # the class inherits main_input_name "input_ids" but takes no text


def _minicpm_vision(x, cfg, g):
    # MiniCPM image processors pack every image's patches side by side into one
    # (1, channels, patch, patches * patch) strip, with each image's (h, w) patch grid.
    patch = int(cfg.patch_size)
    h, w = GRID[1:]
    x["pixel_values"] = torch.randn(1, int(_first(cfg, "num_channels", default=3)), patch, BATCH * h * w * patch, generator=g)
    x["target_sizes"] = torch.tensor([[h, w]] * BATCH, dtype=torch.int32)


def _kimi_k25_vision(x, cfg, g):
    # Kimi-K2.5's image processor keeps each patch as a (channels, patch, patch) image for the
    # convolutional patch embedding, one row per patch of every image's (t, h, w) grid.
    patch = int(cfg.patch_size)
    grid = torch.tensor([GRID] * BATCH)
    x["grid_thw"] = grid
    x["pixel_values"] = torch.randn(int(grid.prod(-1).sum()), _channels(cfg), patch, patch, generator=g)
    x.pop("input_ids", None)  # an inherited main_input_name; the tower takes no text


def _gemma4_audio(x, cfg, g):
    # Gemma4FeatureExtractor: (batch, frames, mel bins) with a validity mask over frames. The
    # subsampling's projection takes the mel axis after two stride-2 convolutions as
    # subsampling_conv_channels[0] // 4 wide, so the mel bins equal subsampling_conv_channels[0].
    mels = int(cfg.subsampling_conv_channels[0])
    frames = 8 * int(cfg.attention_chunk_size)  # two attention chunks after 4x subsampling
    x["input_features"] = torch.randn(BATCH, frames, mels, generator=g)
    mask = torch.ones(BATCH, frames, dtype=torch.bool)
    mask[1, -8:] = False
    x["attention_mask"] = mask
    x.pop("input_ids", None)


def _oneformer(x, cfg, g):
    # OneFormerProcessor tokenizes the task prompt ("the task is semantic") to task_seq_len ids,
    # which the task encoder reads as features.
    ids = torch.randint(1, int(cfg.text_encoder_vocab_size), (BATCH, int(cfg.task_seq_len)), generator=g)
    x["task_inputs"] = ids


def _omdet_turbo(x, cfg, g):
    # OmDetTurboProcessor: the task prompt per image, every image's class names tokenized one per
    # row, and how many classes each image has (two here).
    classes = 2
    x["tasks_input_ids"] = _token_ids(cfg, (BATCH, SEQ), g)
    x["tasks_attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    x["classes_input_ids"] = _token_ids(cfg, (BATCH * classes, SEQ // 2), g)
    mask = torch.ones(BATCH * classes, SEQ // 2, dtype=torch.long)
    mask[-1, -1:] = 0  # a shorter class name
    x["classes_attention_mask"] = mask
    x["classes_structure"] = torch.full((BATCH,), classes, dtype=torch.long)


def _pi0(x, cfg, g):
    # PI0Model: the prefix as PI0Processor builds it (one camera image, its image tokens, then the
    # prompt) and the suffix of embedded state and noisy action chunk that the policy head makes
    # (one state token and chunk_size action tokens).
    vlm = cfg.vlm_config
    h, w = _size(vlm.vision_config.image_size)
    patch = int(vlm.vision_config.patch_size)
    image_tokens = (h // patch) * (w // patch)
    text = _token_ids(cfg, (BATCH, SEQ), g)
    x["input_ids"] = torch.cat([torch.full((BATCH, image_tokens), int(vlm.image_token_id)), text], dim=1)
    mask = torch.ones_like(x["input_ids"])
    mask[1, -2:] = 0
    x["attention_mask"] = mask
    x["pixel_values"] = torch.randn(BATCH, 1, 3, h, w, generator=g)
    x["pixel_attention_mask"] = torch.ones(BATCH, 1, dtype=torch.bool)
    x["action_embeds"] = torch.randn(BATCH, 1 + int(cfg.chunk_size), int(cfg.dit_config.hidden_size), generator=g)


def _univnet(x, cfg, g):
    # UnivNetFeatureExtractor: (batch, frames, mel bins) spectrograms and the vocoder's input noise
    # (batch, frames, model_in_channels), which it draws itself only when none is given.
    frames = 32
    x["input_features"] = torch.randn(BATCH, frames, int(cfg.num_mel_bins), generator=g)
    x["noise_sequence"] = torch.randn(BATCH, frames, int(cfg.model_in_channels), generator=g)


def _granite_speech5(x, cfg, g):
    # GraniteSpeech5FeatureExtractor: (batch, frames, 4 * mel bins), the log-mels with their deltas
    # and every two frames stacked.
    x["input_features"] = torch.randn(BATCH, 16, 4 * int(_first(cfg, "num_mel_bins")), generator=g)


def _dia(x, cfg, g):
    # DiaProcessor: the decoder reads audio codes as (batch, frames, num_channels), one column per
    # codebook.
    dec = cfg.decoder_config
    x["decoder_input_ids"] = _token_ids(dec, (BATCH, DEC_SEQ, int(dec.num_channels)), g)


def _kyutai_stt(x, cfg, g):
    # Kyutai STT's inputs interleave per step the text token and one code of each audio codebook:
    # (batch, sequence, 1 + num_codebooks), codes below codebook_vocab_size.
    codes = torch.randint(0, int(cfg.codebook_vocab_size) - 1, (BATCH, SEQ, int(cfg.num_codebooks)), generator=g)
    x["input_ids"] = torch.cat([x["input_ids"][..., None], codes], dim=-1)


def _speecht5(x, cfg, g):
    # SpeechT5Model without pre-nets (as built from a config): the encoder and decoder take
    # already embedded sequences of the model width; the task models add the speech or text pre-nets.
    width = int(cfg.hidden_size)
    x["input_values"] = torch.randn(BATCH, SEQ, width, generator=g)
    x["decoder_input_values"] = torch.randn(BATCH, DEC_SEQ, width, generator=g)


def _timesfm(x, cfg, g):
    # TimesFM reads the context in whole patches of patch_length (two here), with its padding
    # indicator (none padded) and a frequency class.
    length = 2 * int(cfg.patch_length)
    x["past_values"] = torch.randn(BATCH, length, generator=g)
    x["past_values_padding"] = torch.zeros(BATCH, length, dtype=torch.long)
    x["freq"] = torch.zeros(BATCH, dtype=torch.long)


def _vibevoice_encoder(x, cfg, g):
    # The acoustic tokenizer's encoder: (batch, channels, samples) audio.
    x["hidden_states"] = torch.randn(BATCH, int(cfg.channels), AUDIO_SAMPLES, generator=g)
    x.pop("input_values", None)  # the inherited main input name; the forward takes hidden_states


def _vibevoice_decoder(x, cfg, g):
    # The acoustic tokenizer's decoder: continuous latents, channels first (batch, hidden_size, frames).
    x["hidden_states"] = torch.randn(BATCH, int(cfg.hidden_size), SEQ, generator=g)
    x.pop("input_values", None)


def _xcodec2(x, cfg, g):
    # Xcodec2FeatureExtractor: mono audio and its semantic-encoder features at the same frame rate,
    # one feature frame per hop_length samples (the acoustic encoder's downsampling).
    frames = SEQ
    x["input_values"] = torch.randn(BATCH, 1, frames * int(cfg.hop_length), generator=g)
    width = int(_first(cfg.semantic_model_config, "feature_projection_input_dim"))
    x["input_features"] = torch.randn(BATCH, frames, width, generator=g)


def _fun_asr_nano(x, cfg, g):
    # FunAsrNanoFeatureExtractor's low-frame-rate features: num_stacked_frames mel frames stacked
    # per step, (batch, steps, num_mel_bins * num_stacked_frames), with the step mask.
    width = int(cfg.num_mel_bins) * int(cfg.num_stacked_frames)
    x["input_features"] = torch.randn(BATCH, 16, width, generator=g)
    x["input_features_mask"] = torch.ones(BATCH, 16, dtype=torch.long)
    x["input_features_mask"][1, -4:] = 0


def _glimmer_assistant(x, cfg, g):
    # The drafter denoises a block of block_size embeddings given the target model's hidden states
    # at its target_layer_ids, concatenated along the width, for the accepted context tokens.
    width = int(cfg.hidden_size)
    x["noise_embeds"] = torch.randn(BATCH, int(cfg.block_size), width, generator=g)
    x["context_hidden_states"] = torch.randn(BATCH, SEQ, width * len(cfg.target_layer_ids), generator=g)


def _inkling2_vision(x, cfg, g):
    # Inkling2's image processor: one (patch * merge, patch * merge, channels) tile in [-1, 1] per
    # language-model image token, and each image's (t, h, w) grid counted in those tokens.
    side = int(cfg.patch_size) * int(cfg.spatial_merge_size)
    grid = torch.tensor([[1, 2, 2]] * BATCH)
    x["image_grid_thw"] = grid
    x["pixel_values"] = torch.rand(int(grid.prod(-1).sum()), side, side, _channels(cfg), generator=g) * 2 - 1


def _molmo2(x, cfg, g):
    # Molmo2Processor's token types: 0 for text; a text-only batch is all text.
    x["mm_token_type_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.long)


# Architectures whose processors produce inputs the forward signature marks optional but the model
# needs (or needs in a particular layout); each function completes the generated inputs.
ARCH_INPUTS = {
    "audio-spectrogram-transformer": _spectrogram,
    "audioflamingo3_encoder": _feature_mask,
    "blip-2": lambda x, cfg, g: _query_placeholders(x, cfg, g, cfg.image_token_index),
    "bros": _bros,
    "clap": _clap,
    "dia": _dia,
    "fastspeech2_conformer": _fastspeech2,
    "fastspeech2_conformer_with_hifigan": _fastspeech2,
    "fun_asr_nano_encoder": _fun_asr_nano,
    "gemma4_audio": _gemma4_audio,
    "gemma4_vision": _gemma4_vision,
    "granite_speech5_ctc": _granite_speech5,
    "granite_speech5_encoder": _granite_speech5,
    "idefics": _idefics,
    "inkling2_vision": _inkling2_vision,
    "instructblip": lambda x, cfg, g: _query_placeholders(x, cfg, g, cfg.image_token_index),
    "instructblipvideo": lambda x, cfg, g: _query_placeholders(x, cfg, g, cfg.video_token_index, frames=4),
    "kimi_k25_vision": _kimi_k25_vision,
    "kosmos-2": _kosmos2,
    "kyutai_speech_to_text": _kyutai_stt,
    "lxmert": _lxmert,
    "minicpm_ocr_vision": _minicpm_vision,
    "minicpmv4_7_vision": _minicpm_vision,
    "molmo2": _molmo2,
    "muse_glimmer_assistant": _glimmer_assistant,
    "neucodec": _mono,
    "omdet-turbo": _omdet_turbo,
    "oneformer": _oneformer,
    "pi0": _pi0,
    "qwen3_asr_encoder": _qwen3_asr,
    "seggpt": _seggpt,
    "speecht5": _speecht5,
    "timesfm": _timesfm,
    "tvp": _tvp,
    "univnet": _univnet,
    "vibevoice_acoustic_tokenizer_decoder": _vibevoice_decoder,
    "vibevoice_acoustic_tokenizer_encoder": _vibevoice_encoder,
    "voxtral_realtime": _voxtral_realtime,
    "wavtokenizer_encoder": _mono,
    "xclip": _xclip,
    "xcodec": _mono,
    "xcodec2": _xcodec2,
}


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
        n_time = _first(cfg, "num_time_features", default=None)
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
        x["labels"] = _token_ids(cfg, (BATCH, DEC_SEQ), g)
    elif head in ("causal_lm",):
        x["labels"] = x["input_ids"].clone()
    elif head == "masked_lm":
        labels = x["input_ids"].clone()
        labels[:, ::2] = -100
        x["labels"] = labels
    elif head.endswith("classification"):
        x["labels"] = torch.randint(0, 3, (BATCH,), generator=g)
    elif enc_dec and "decoder_input_ids" in params and "decoder_input_ids" not in x:
        x["decoder_input_ids"] = _token_ids(cfg, (BATCH, DEC_SEQ), g)
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
