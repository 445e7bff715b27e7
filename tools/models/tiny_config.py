"""Tiny configurations built programmatically from an architecture's default config.

The defaults of most configs describe a released checkpoint (billions of parameters). Sizes are
shrunk by attribute name, recursively through sub-configs (text, vision, audio, encoder,
decoder, backbone), in rungs from most to least aggressive: a rung that the model rejects at
construction (or that the CPU run rejects) is followed by a gentler one.
"""
from __future__ import annotations

import copy

# Token ids of the shrunk vocabulary: ordinary tokens are drawn below SPECIAL_BASE, the special
# ids of a config (pad, bos, image token, ...) that fell outside the vocabulary are moved above it.
VOCAB = 128
SPECIAL_BASE = 96
MAX_PARAMS = 25_000_000

LAYERS = {"num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
          "num_decoder_layers", "num_encoder_layers", "depth", "num_text_layers", "num_vision_layers",
          "num_audio_layers", "num_decoder_blocks", "num_encoder_blocks", "text_num_layers", "num_blocks",
          "num_self_attends_per_block"}
HIDDEN = {"hidden_size", "emb_dim", "d_model", "n_embd", "embed_dim", "dim", "encoder_hidden_size", "decoder_hidden_size",
          "word_embed_proj_dim", "projection_dim", "embedding_size", "text_hidden_size", "vision_hidden_size",
          "out_hidden_size", "projector_hidden_size", "d_latents", "hidden_dim", "decoder_embed_dim"}
HEADS = {"num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
         "decoder_attention_heads", "decoder_num_attention_heads", "num_attention_heads_per_layer"}
INTERMEDIATE = {"intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
                "decoder_intermediate_size", "ffn_hidden_size", "expert_ffn_hidden_size", "mlp_dim", "inner_dim"}
SMALL_DIMS = {"moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "head_dim": 16,
              "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "qk_head_dim": 16,
              "kv_lora_rank": 16, "q_lora_rank": 16, "index_head_dim": 16, "index_n_heads": 2,
              "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 2,
              "linear_num_value_heads": 2, "d_kv": 16, "num_experts": 4, "num_local_experts": 4,
              "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "num_shared_experts": 1,
              "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1, "max_position_embeddings": 128,
              "n_positions": 128, "max_source_positions": 32, "max_target_positions": 64,
              "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2, "state_size": 8,
              "mamba_d_state": 8, "time_step_rank": 8, "conv_kernel": 4, "expand": 2, "num_queries": 8,
              "num_mel_bins": 16, "codebook_size": 32, "codebook_dim": 8, "num_codebooks": 2,
              "max_2d_position_embeddings": 128, "max_window_layers": 2, "sliding_window": 64,
              "classifier_proj_size": 16, "tdnn_dim": 16, "xvector_output_dim": 16, "num_labels": 3,
              "index_topk": 4, "window_size": 4, "image_seq_length": 4, "num_image_tokens": 4, "mm_tokens_per_image": 4,
              "rel_pos_bins": 8, "relative_attention_num_buckets": 8, "relative_attention_max_distance": 16,
              "num_buckets": 8, "num_frames": 2, "bottleneck_size": 16, "num_filters": 16,
              "linear_conv_kernel_dim": 4, "num_groups": 2, "n_positions_max": 128, "num_latents": 8, "d_state": 8,
              "attention_window": 8, "block_size": 8, "chunk_size": 8,
              "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 16, "context_length": 16,
              "prediction_length": 4, "feature_projection_input_dim": 32}
# Compound-scaling multipliers (EfficientNet) that widen and deepen every stage.
SCALES = ("width_coefficient", "depth_coefficient", "width_multiplier", "depth_multiplier")
IMAGE = {"image_size": 32, "patch_size": 4, "vision_image_size": 32, "crop_size": 32, "img_size": 32}
NOISE = ("mask_time_prob", "mask_feature_prob", "router_jitter_noise", "label_noise_ratio", "box_noise_scale",
         "layerdrop", "encoder_layerdrop", "decoder_layerdrop", "drop_path_rate", "stochastic_depth_prob")
# Random augmentations some models apply in train mode (DINOv3's RoPE coordinate jitter).
AUGMENT = ("pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale")
LIST_LAYERS = ("blocks_per_stage", "depths", "num_block_repeats", "num_layers_per_block", "encoder_depths", "decoder_depths", "block_repeats")
LIST_PER_LAYER = ("layer_types", "mlp_layer_types", "attn_layer_types", "block_types", "layers_block_type",
                  "hybrid_override_pattern")
LIST_HIDDEN = ("embed_dim_per_stage", "hidden_sizes", "embed_dims", "neck_hidden_sizes", "dims", "embedding_dims", "channels")
LIST_HEADS = ("num_attention_heads", "num_heads", "attention_heads", "num_attention_heads_per_stage")


def _is_config(value) -> bool:
    from transformers import PretrainedConfig
    return isinstance(value, PretrainedConfig)


def _children(cfg):
    for name, value in list(vars(cfg).items()):
        if _is_config(value):
            yield name, value


def _get(cfg, name):
    # The instance's own attributes only: some configs raise on reading a per-layer value globally.
    return vars(cfg).get(name)


def _read(cfg, name):
    """An attribute through the config class's attribute map; None where a per-layer config refuses a global read."""
    try:
        return getattr(cfg, name, None)
    except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError
        return None


def _set(cfg, name, value):
    try:
        setattr(cfg, name, value)
    except (AttributeError, TypeError):  # a read-only property of the config class
        pass


def _shrink_int(cfg, name, target):
    value = _get(cfg, name)
    if isinstance(value, int) and not isinstance(value, bool) and value > target:
        _set(cfg, name, target)
        return True
    return False


def _rescale_sections(sections, total):
    """Integer sections with the same proportions, summing to ``total`` (each at least 1)."""
    s = sum(sections)
    out = [max(1, round(v * total / s)) for v in sections]
    out[-1] += total - sum(out)
    return out if out[-1] >= 1 else None


def _fix_consistency(cfg, head_is_rope=False):
    # Sizes that other sizes determine: rotary sections of the head dimension, state-space heads.
    hidden = _get(cfg, "hidden_size")
    heads = _get(cfg, "num_attention_heads")
    head_dim = _get(cfg, "head_dim") or (hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None)
    rope = _get(cfg, "rope_parameters") or _get(cfg, "rope_scaling")
    if isinstance(rope, dict) and isinstance(head_dim, int):
        factor = rope.get("partial_rotary_factor") or _get(cfg, "partial_rotary_factor") or 1.0
        half_rotary = int(head_dim * factor) // 2
        if "mrope_section" in getattr(type(cfg), "ignore_keys_at_rope_validation", ()) and "mrope_section" not in rope:
            # The model's default sections are sized for the released head dimension.
            rope["mrope_section"] = [16, 24, 24]
        for key in ("mrope_section", "mrope_sections"):
            sec = rope.get(key)
            if isinstance(sec, list) and sec and all(isinstance(v, int) for v in sec) and sum(sec) > half_rotary:
                new = _rescale_sections(sec, half_rotary)
                if new:
                    rope[key] = new
    if "head_dim" in vars(cfg) and _get(cfg, "head_dim") is None and isinstance(hidden, int) and isinstance(heads, int) and heads:
        _set(cfg, "head_dim", hidden // heads)  # some models read it without a fallback
    rope_dim, nope_dim = _get(cfg, "qk_rope_head_dim"), _get(cfg, "qk_nope_head_dim")
    if isinstance(rope_dim, int) and isinstance(nope_dim, int):
        # Multi-head latent attention: where the released config sizes the rotary embedding by
        # head_dim (head_dim == qk_rope_head_dim), the shrunk one must too.
        if head_is_rope and isinstance(_get(cfg, "head_dim"), int):
            _set(cfg, "head_dim", rope_dim)
        if isinstance(_get(cfg, "qk_head_dim"), int):
            _set(cfg, "qk_head_dim", rope_dim + nope_dim)
    rotary = _get(cfg, "rotary_dim")
    width, n = _read(cfg, "hidden_size"), _read(cfg, "num_attention_heads")  # attribute maps
    head_dim = _get(cfg, "head_dim") or head_dim or (width // n if isinstance(width, int) and isinstance(n, int) and n else None)
    if isinstance(rotary, int) and isinstance(head_dim, int) and rotary > head_dim:
        _set(cfg, "rotary_dim", head_dim)  # the rotary part cannot exceed the shrunk head
    if "num_experts_per_tok" in vars(cfg) and _get(cfg, "num_experts_per_tok") is None and isinstance(
            _get(cfg, "n_routed_experts") or _get(cfg, "num_experts"), int):
        _set(cfg, "num_experts_per_tok", SMALL_DIMS["num_experts_per_tok"])  # DeepSeek-V2 leaves it unset
    kinds = _get(cfg, "layer_types")
    if isinstance(kinds, list) and "sliding_attention" in kinds and "sliding_window" in vars(cfg) and _get(cfg, "sliding_window") is None:
        _set(cfg, "sliding_window", SMALL_DIMS["sliding_window"])  # a kept sliding layer needs its window
    languages = _get(cfg, "languages")
    if "default_language" in vars(cfg) and _get(cfg, "default_language") is None and languages:
        _set(cfg, "default_language", list(languages)[0])  # X-MOD's adapters need a language to route by
    if "vocab_size" in vars(cfg) and _get(cfg, "vocab_size") is None:
        _set(cfg, "vocab_size", VOCAB)
    expand = _get(cfg, "expand") or _get(cfg, "mamba_expand")
    if isinstance(expand, int) and isinstance(hidden, int):
        inner = expand * hidden
        for nh, hd in (("num_heads", "head_dim"), ("mamba_n_heads", "mamba_d_head"), ("n_mamba_heads", "mamba_headdim")):
            if isinstance(_get(cfg, nh), int) and isinstance(_get(cfg, hd), int):
                _set(cfg, hd, 16)
                _set(cfg, nh, max(1, inner // 16))
        for name in ("n_groups", "mamba_n_groups"):
            _shrink_int(cfg, name, 1)


def _disable_dropout(cfg):
    for name, value in list(vars(cfg).items()):
        low = name.lower()
        if isinstance(value, float) and ("dropout" in low or "pdrop" in low or "drop_prob" in low
                                         or low in NOISE):
            _set(cfg, name, 0.0)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, float) for v in value) and (
                "drop" in low):
            _set(cfg, name, [0.0] * len(value))  # per-stage rates (CvT)
    if _get(cfg, "token_dropout") is True:
        _set(cfg, "token_dropout", False)  # ESM's masked-token rescaling, a train-mode augmentation
    if isinstance(_get(cfg, "num_denoising"), int):
        _set(cfg, "num_denoising", 0)
    for name in AUGMENT:
        if _get(cfg, name) is not None:
            _set(cfg, name, None)


def _shrink_lists(cfg, layers):
    for name in LIST_LAYERS:
        value = _get(cfg, name)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            _set(cfg, name, [min(v, 1) for v in value])
    suffixed = [n for n, v in vars(cfg).items() if isinstance(v, (list, tuple)) and n.lower().endswith(
        ("_channels", "_sizes", "_dims", "hidden_dim", "embed_dim")) and n not in LIST_HIDDEN]
    for name in (*LIST_HIDDEN, *suffixed):
        value = _get(cfg, name)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            _set(cfg, name, [min(v, 16 * 2 ** i) for i, v in enumerate(value)])
    for name in LIST_HEADS:
        value = _get(cfg, name)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            _set(cfg, name, [min(v, 2) for v in value])
    # Hierarchical vision models: the final width follows from the stage widths.
    sizes = _get(cfg, "hidden_sizes")
    if isinstance(sizes, list) and sizes and isinstance(_get(cfg, "hidden_size"), int):
        _set(cfg, "hidden_size", sizes[-1])
    depths = _get(cfg, "depths")
    if isinstance(depths, list) and isinstance(_get(cfg, "embed_dim"), int) and isinstance(_get(cfg, "hidden_size"), int):
        _set(cfg, "hidden_size", _get(cfg, "embed_dim") * 2 ** (len(depths) - 1))
    blocks = _get(cfg, "blocks_per_stage")
    if isinstance(blocks, list) and isinstance(_get(cfg, "global_attention_blocks"), list):
        _set(cfg, "global_attention_blocks", [i for i in _get(cfg, "global_attention_blocks") if i < sum(blocks)] or [0])
    for name in LIST_PER_LAYER:
        value = _get(cfg, name)
        if isinstance(value, (list, tuple)) and len(value) > layers:
            # Keep one layer of each kind when there are several kinds (hybrid attention/SSM stacks).
            kinds = list(dict.fromkeys(value))
            _set(cfg, name, (kinds + list(value))[:max(layers, len(kinds))] if len(kinds) > 1 else list(value[:layers]))
        elif isinstance(value, str) and len(value) > layers:
            _set(cfg, name, value[:layers])


def _fix_backbone_stages(cfg, layers_before):
    """A ViT backbone (one stage per layer) keeps as many outputs as its released config, on the last layers."""
    n, stages, out = _get(cfg, "num_hidden_layers"), _get(cfg, "stage_names"), _get(cfg, "_out_indices")
    if not (isinstance(n, int) and isinstance(stages, list) and isinstance(out, list) and out):
        return
    if len(stages) != layers_before + 1 or max(out) <= n:
        return  # stages are not layers (ResNet, Swin), or every output still exists
    n = max(n, len(out))
    _set(cfg, "num_hidden_layers", n)
    _set(cfg, "stage_names", ["stem"] + [f"stage{i}" for i in range(1, n + 1)])
    _set(cfg, "out_indices", list(range(n - len(out) + 1, n + 1)))
    for name, value in list(vars(cfg).items()):
        if name.endswith(("_indexes", "_indices")) and name != "_out_indices" and isinstance(value, list):
            _set(cfg, name, [i for i in value if isinstance(i, int) and i < n])  # per-layer choices


def _fix_layer_lists(cfg):
    # Lists indexed by layer must not exceed the new layer count.
    n = _get(cfg, "num_hidden_layers")
    if not isinstance(n, int):
        return
    for name in LIST_PER_LAYER:
        value = _get(cfg, name)
        if isinstance(value, (list, tuple)) and len(value) != n and len(value) > 0:
            if len(value) > n:
                _set(cfg, name, list(value[:n]) if isinstance(value, list) else value[:n])
            else:
                _set(cfg, "num_hidden_layers", len(value))
    for name in ("mlp_only_layers",):
        value = _get(cfg, name)
        if isinstance(value, list):
            _set(cfg, name, [i for i in value if i < n])


SIZE_SUFFIXES = ("_size", "_dim", "_dims", "_channels", "emb_dim")
NOT_SIZES = ("vocab", "position", "max_", "image", "patch", "kernel", "window", "chunk", "batch", "sample",
             "frame", "stride", "bucket", "codebook", "num_", "label", "n_", "length", "segment", "crop")


def _not_size(low: str, prefix_only=()) -> bool:
    return any(k in low for k in NOT_SIZES if k not in prefix_only) or low.startswith(prefix_only)


def _shrink_by_suffix(cfg):
    # Widths the named lists miss (per-model names such as emb_dim or expert_ffn_hidden_size):
    # model widths to 32, feed-forward widths to 64.
    for name, value in list(vars(cfg).items()):
        low = name.lower()
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 64):
            continue
        if not low.endswith(SIZE_SUFFIXES) or _not_size(low):
            continue
        wide = any(k in low for k in ("ffn", "intermediate", "inner", "mlp", "expert"))
        _set(cfg, name, 64 if wide else 32)


WIDTH_WORDS = ("size", "sizes", "dim", "dims", "channels", "channel", "hidden", "width", "widths", "embd", "model")
NOT_WIDTH_WORDS = ("head", "heads", "rope", "lora", "rank", "state", "ratio", "groups", "kv", "qk")
MIN_TIED_WIDTH = 32


def _is_width(name: str) -> bool:
    low = name.lower()
    words = low.split("_")
    # "n_" marks a count only at the start of a name (n_heads, not encoder_hidden_dim).
    return (name in HIDDEN or name in INTERMEDIATE or name in LIST_HIDDEN
            or any(w in words or low.endswith(w) for w in WIDTH_WORDS)) and not (
        _not_size(low, prefix_only=("n_",)) or any(w in words for w in NOT_WIDTH_WORDS))


def _widths(cfg, path=()):
    """(config path, attribute, index or None, value) of every width-like integer, lists element-wise."""
    for name, value in vars(cfg).items():
        if _is_config(value):
            yield from _widths(value, path + (name,))
        elif not _is_width(name):
            continue
        elif isinstance(value, int) and not isinstance(value, bool):
            yield path, name, None, value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            for i, v in enumerate(value):
                yield path, name, i, v


def _at(cfg, path):
    for name in path:
        cfg = vars(cfg)[name]
    return cfg


def tie_widths(default, cfg):
    """Widths equal in the default config are made equal again in the shrunk one.

    A model wires one width into several attributes, often across sub-configs (a DETR decoder's
    input channels are its backbone's stage widths; an encoder width reappears as a projector's
    input); the name-based shrinking sets each on its own. Every width whose default value was
    shrunk anywhere takes the smallest value that default value was shrunk to.
    """
    old = {(p, n, i): v for p, n, i, v in _widths(default)}
    new = {(p, n, i): v for p, n, i, v in _widths(cfg)}
    target = {}
    for key, was in old.items():
        now = new.get(key)
        # The fixed small sizes (SMALL_DIMS) are no model width: a coincidence, not a tie.
        if isinstance(now, int) and was >= MIN_TIED_WIDTH and now < was and key[1] not in SMALL_DIMS:
            target[was] = min(target.get(was, now), now)
    for (path, name, i), was in old.items():
        want = target.get(was)
        if want is None or (path, name, i) not in new or new[(path, name, i)] <= want:
            continue
        owner = _at(cfg, path)
        if i is None:
            _set(owner, name, want)
        else:
            value = list(_get(owner, name))
            value[i] = want
            _set(owner, name, value)


def shrink(cfg, rung: int):
    """Shrinks ``cfg`` in place; level 0 shrinks everything, 1 leaves lists and image sizes, 2 only layers."""
    _disable_dropout(cfg)
    head_is_rope = isinstance(_get(cfg, "head_dim"), int) and _get(cfg, "head_dim") == _get(cfg, "qk_rope_head_dim")
    layers = 2
    layers_before = _get(cfg, "num_hidden_layers")
    for name in LAYERS:
        _shrink_int(cfg, name, layers)
    _fix_backbone_stages(cfg, layers_before)
    if rung <= 1:
        heads_before = _get(cfg, "num_attention_heads")
        kv_before = _get(cfg, "num_key_value_heads")
        for name in HIDDEN:
            _shrink_int(cfg, name, 32)
        for name in HEADS:
            _shrink_int(cfg, name, 2)
        if isinstance(kv_before, int) and isinstance(heads_before, int):
            # Keep grouped-query attention grouped and multi-head attention multi-head.
            _set(cfg, "num_key_value_heads", 1 if kv_before < heads_before else _get(cfg, "num_attention_heads") or 2)
        for name in INTERMEDIATE:
            _shrink_int(cfg, name, 64)
        for name, target in SMALL_DIMS.items():
            _shrink_int(cfg, name, target)
        _shrink_int(cfg, "vocab_size", VOCAB)
        for name, value in list(vars(cfg).items()):
            if name.endswith("_vocab"):  # hashed n-gram tables (BLT) sized like a vocabulary
                _shrink_int(cfg, name, VOCAB)
            elif name in SCALES and isinstance(value, float) and value > 1.0:
                _set(cfg, name, 1.0)
        _fix_consistency(cfg, head_is_rope)
    if rung == 0:
        _shrink_by_suffix(cfg)
        for name, target in IMAGE.items():
            value = _get(cfg, name)
            if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
                _set(cfg, name, [min(v, target) for v in value])
            else:
                _shrink_int(cfg, name, target)
        _shrink_lists(cfg, layers)
        depths, window, patch = _get(cfg, "depths"), _get(cfg, "window_size"), _get(cfg, "patch_size")
        if isinstance(depths, list) and isinstance(window, int) and isinstance(patch, int) and "image_size" in vars(cfg):
            # Windowed attention (Swin): every stage's resolution a multiple of the window.
            _set(cfg, "image_size", patch * window * 2 ** (len(depths) - 1))
    merge, patch = _get(cfg, "spatial_merge_size"), _get(cfg, "patch_size")
    if all(isinstance(v, int) for v in (merge, patch, _get(cfg, "window_size"))):
        # Qwen2.5-VL's attention windows are in pixels: two merged patches wide.
        _set(cfg, "window_size", 2 * merge * patch)
    _fix_layer_lists(cfg)
    for _, child in _children(cfg):
        shrink(child, rung)
    return cfg


def special_ids(cfg) -> set[int]:
    """Every token id a config (or its sub-configs) gives a special meaning."""
    ids = set()
    for name, value in vars(cfg).items():
        if name.endswith(("_token_id", "_token_index", "_token_ids")) or name in ("pad_token_id", "bos_token_id"):
            for v in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                    ids.add(v)
    for _, child in _children(cfg):
        ids |= special_ids(child)
    return ids


def _remap_special(cfg, mapping, vocab):
    for name, value in list(vars(cfg).items()):
        if not (name.endswith(("_token_id", "_token_index", "_token_ids"))):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= vocab:
            _set(cfg, name, mapping.setdefault(value, SPECIAL_BASE + len(mapping)))
        elif isinstance(value, list) and all(isinstance(v, int) for v in value):
            _set(cfg, name, [mapping.setdefault(v, SPECIAL_BASE + len(mapping)) if v >= vocab else v for v in value])
    for _, child in _children(cfg):
        _remap_special(child, mapping, vocab)


def _vocab(cfg):
    v = _get(cfg, "vocab_size")
    if isinstance(v, int):
        return v
    for _, child in _children(cfg):
        v = _vocab(child)
        if v is not None:
            return v
    return None


def _conformer_block(cfg, part):
    keys = ("num_attention_heads", "layers", "kernel_size", "attention_dropout_rate", "dropout_rate",
            "positional_dropout_rate", "linear_units", "normalize_before", "concat_after")
    return {k: _get(cfg, f"{part}_{k}") for k in keys}


KEEP = object()  # an override that restores the default config's value
# Per-config-class values the generic rules cannot derive (a callable takes the shrunk config).
OVERRIDES = {
    # The stem is hard-wired to 32 channels (the first block's in_channels) and the top batch norm
    # to round_filters(1280), which hidden_dim must equal once width_coefficient is 1.
    "EfficientNetConfig": {"in_channels": KEEP, "hidden_dim": 1280},
    "AlignVisionConfig": {"in_channels": KEEP, "hidden_dim": 1280},
    # The image embedding is the pooled last stage (its channels scaled by width_coefficient), which
    # the contrastive product meets with the projected text embedding.
    "AlignConfig": {"projection_dim": lambda c: int(c.vision_config.out_channels[-1] * c.vision_config.width_coefficient)},
    # Token embeddings are the concatenation of four coordinate and two shape embeddings.
    "LayoutLMv3Config": {"coordinate_size": lambda c: c.hidden_size // 8, "shape_size": lambda c: c.hidden_size // 4},
    # Six box-coordinate embeddings of hidden_size // 6 each must add up to the width.
    "LiltConfig": {"hidden_size": 48},
    # The vision tower's attention pooling has hidden_size // 64 heads, and the towers share a width.
    "BridgeTowerConfig": {"hidden_size": 64},
    "BridgeTowerTextConfig": {"hidden_size": 64},
    "BridgeTowerVisionConfig": {"hidden_size": 64},
    # The box embedding widths are derived from the width at construction of the config; each of the
    # eight coordinates needs an even sinusoid width, so the width is at least 64.
    "BrosConfig": {"hidden_size": 64, "dim_bbox_sinusoid_emb_2d": lambda c: c.hidden_size // 4,
                   "dim_bbox_sinusoid_emb_1d": lambda c: c.hidden_size // 4 // c.dim_bbox,
                   "dim_bbox_projection": lambda c: c.hidden_size // c.num_attention_heads},
    # The encoder and decoder read their sizes and dropout rates from dicts the config derives from
    # its flat attributes at construction; they are derived again from the shrunk attributes.
    "FastSpeech2ConformerConfig": {"encoder_config": lambda c: _conformer_block(c, "encoder"),
                                   "decoder_config": lambda c: _conformer_block(c, "decoder")},
    # One layer per patching stage (the stages' patch sizes multiply to the samples per token).
    "MuseSparkAudioConfig": {"num_hidden_layers": lambda c: len(c.hidden_sizes)},
    # A shorter padded filter bank than the released 1024 frames: fewer patches, same layout.
    "ASTConfig": {"max_length": 64},
    # Frames are padded to max_img_size with a learned prompt visual_prompt_size wide.
    "TvpConfig": {"max_img_size": 64, "visual_prompt_size": 8},
    # The model sees the prompt image stacked above the input image: twice as high as wide.
    "SegGptConfig": {"image_size": [64, 32]},
    # The default configs leave the image / video placeholder id unset (the released checkpoints add
    # it to the tokenizer); 32 query tokens per image or frame would make a long prompt.
    "InstructBlipVideoConfig": {"num_query_tokens": 4, "video_token_index": VOCAB - 1},
    "InstructBlipConfig": {"num_query_tokens": 4, "image_token_index": VOCAB - 1},
    "Blip2Config": {"num_query_tokens": 4, "image_token_index": VOCAB - 1},
    # The audio tower is a Swin over the mel spectrogram folded into a spec_size square: every
    # stage's resolution a multiple of the window, as tiny Swin configs get for image_size; the
    # last stage's frequency rows are grouped by spec_size // num_mel_bins, so at least that many.
    "ClapAudioConfig": {"window_size": 2, "spec_size": lambda c: c.patch_size * 2 * 2 ** (len(c.depths) - 1),
                        "num_mel_bins": lambda c: c.spec_size,
                        # Each stage doubles the patch embedding width up to hidden_size.
                        "hidden_size": 64, "patch_embeds_hidden_size": lambda c: c.hidden_size // 2 ** (len(c.depths) - 1)},
    # The encoders' rotary width is at least 32, so a head must be at least that wide.
    "ClvpEncoderConfig": {"hidden_size": lambda c: 32 * c.num_attention_heads},
    # The vocoder reads the acoustic model's mel spectrogram.
    "FastSpeech2ConformerHifiGanConfig": {"model_in_dim": SMALL_DIMS["num_mel_bins"]},
    # The quantizer works on the concatenated acoustic and semantic features.
    "XcodecConfig": {"codebook_dim": lambda c: c.acoustic_model_config.hidden_size + c.semantic_model_config.hidden_size},
    # The codebook entries have the encoder's width (the default config ties them at 512).
    "WavTokenizerEncoderConfig": {"codebook_dim": lambda c: c.hidden_size},
    # The Mamba mixer's inner width is its heads times the head width (1024 = 128 x 8 by default).
    "FalconH1Config": {"mamba_d_ssm": lambda c: c.mamba_n_heads * c.mamba_d_head},
    # The encoder computes relative-position buckets with a hard-coded count of 32, whatever the
    # bias table's size.
    "MPNetConfig": {"relative_attention_num_buckets": KEEP},
    # One encoder block per stage of the per-stage lists; only the last stage (no sequence
    # reduction) carries the class token.
    "PvtConfig": {"num_encoder_blocks": lambda c: len(c.depths)},
    # The quantizers project the concatenated acoustic and semantic features (1024 + 1024 by default).
    "NeuCodecConfig": {"quantization_dim": lambda c: c.hidden_size + c.semantic_model_config.hidden_size},
    "Xcodec2Config": {"quantization_dim": lambda c: c.hidden_size + c.semantic_model_config.hidden_size},
    # The feature pyramid's sizes are the ViT's patch grid upsampled 4x and 2x and as is
    # ([[288, 288], [144, 144], [72, 72]] for 1008-pixel images of 14-pixel patches).
    "Sam3VisionConfig": {"backbone_feature_sizes": lambda c: [
        [c.backbone_config.image_size // c.backbone_config.patch_size * k] * 2 for k in (4, 2, 1)]},
    # Axial position embeddings factor the sequence length (the harness's 8 tokens) and split the width.
    "ReformerConfig": {"axial_pos_shape": (2, 4), "axial_pos_embds_dim": lambda c: (c.hidden_size // 2,) * 2},
    # The upsampling convolution is depthwise over the model width; the quantizer's codebooks
    # have the width of its hidden projection.
    "MimiConfig": {"upsample_groups": lambda c: c.hidden_size,
                   "vector_quantization_hidden_dimension": lambda c: c.codebook_dim},
}


def _override(default, cfg, name, value):
    if value is KEEP:
        return _get(default, name)
    return value(cfg) if callable(value) else value


def _apply_overrides(default, cfg):
    for name, value in OVERRIDES.get(type(cfg).__name__, {}).items():
        _set(cfg, name, _override(default, cfg, name, value))
    for name, child in _children(cfg):
        _apply_overrides(vars(default)[name], child)


def _fill_pad_ids(cfg, taken):
    """An unset pad id where the model derives positions from it (ESM): the lowest free id."""
    if "pad_token_id" in vars(cfg) and _get(cfg, "pad_token_id") is None and isinstance(_get(cfg, "vocab_size"), int):
        _set(cfg, "pad_token_id", min(set(range(len(taken) + 1)) - taken))
    for _, child in _children(cfg):
        _fill_pad_ids(child, taken)


def tiny_config(model_type: str, rung: int = 0):
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(model_type)
    if "prediction_length" in vars(cfg) and cfg.prediction_length is None:
        # Time-series configs derive their context and feature sizes from it at construction.
        cfg = AutoConfig.for_model(model_type, prediction_length=4, context_length=8)
    default = copy.deepcopy(cfg)
    cfg = shrink(cfg, SHRINK_LEVEL[rung])
    if rung == 1:
        tie_widths(default, cfg)
        _fill_pad_ids(cfg, special_ids(cfg))
    _apply_overrides(default, cfg)
    vocab = _vocab(cfg)
    if vocab is not None and vocab <= VOCAB:
        mapping = {}
        _remap_special(cfg, mapping, vocab)
    if getattr(cfg, "is_encoder_decoder", False) and _get(cfg, "decoder_start_token_id") is None:
        _set(cfg, "decoder_start_token_id", _get(cfg, "pad_token_id") if isinstance(_get(cfg, "pad_token_id"), int) else 0)
    if _get(cfg, "use_timm_backbone"):
        # DETR-style models default to a timm backbone; transformers' own ResNet backbone needs no timm.
        _set(cfg, "use_timm_backbone", False)
        _set(cfg, "use_pretrained_backbone", False)
    # Three classes for the classification heads (the labels the inputs draw).
    _set(cfg, "num_labels", 3)
    return cfg


# Rungs, most aggressive first: 0 shrinks everything; 1 as 0 with the widths tied that the default
# config ties (tie_widths) and an unset pad id filled; 2 leaves lists and image sizes; 3 shrinks
# only layers. Rung 1 comes second so that the cases rung 0 already builds keep their configs.
RUNGS = (0, 1, 2, 3)
SHRINK_LEVEL = {0: 0, 1: 0, 2: 1, 3: 2}


def describe(cfg) -> dict:
    """The shrunk sizes, for the dashboard."""
    keys = ("num_hidden_layers", "hidden_size", "d_model", "num_attention_heads", "intermediate_size", "vocab_size")
    return {k: _get(cfg, k) for k in keys if isinstance(_get(cfg, k), int)}


def clone(cfg):
    return copy.deepcopy(cfg)
