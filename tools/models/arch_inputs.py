"""Per-architecture input completions: architectures whose processors produce inputs that the
forward signature marks optional but the model needs, or in a layout the generic rules of
case.py do not derive. Each function completes the generated inputs ``x`` in place."""
from __future__ import annotations

import torch

from .primitives import AUDIO_SAMPLES, BATCH, DEC_SEQ, GRID, SEQ, boxes, channels, first, size_pair, token_ids


def _bros(x, cfg, g):
    # BrosProcessor gives each token its box corners normalised to [0, 1] (floats, not pixels).
    x["bbox"] = boxes(cfg, g).float() / (int(first(cfg, "max_2d_position_embeddings", default=1024)) - 1)
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
        h, w = size_pair(first(cfg.vision_config, "image_size", default=32))
        image = torch.randn(BATCH, 3, h, w, generator=g)
    x["pixel_values"] = image.unsqueeze(1)
    x["image_attention_mask"] = torch.ones(BATCH, SEQ, 1, dtype=torch.long)


def _kosmos2(x, cfg, g):
    # Kosmos2Processor puts latent_query_num image-placeholder tokens after <s><image> and marks them.
    n = int(cfg.latent_query_num)
    ids = token_ids(cfg, (BATCH, SEQ), g)
    x["input_ids"] = torch.cat([ids[:, :1], ids[:, 1:2].expand(BATCH, n), ids[:, 1:]], dim=1)
    mask = torch.zeros_like(x["input_ids"])
    mask[:, 1:1 + n] = 1
    x["image_embeds_position_mask"] = mask
    attention = torch.ones_like(x["input_ids"])
    attention[1, -2:] = 0
    x["attention_mask"] = attention
    h, w = size_pair(first(cfg.vision_config, "image_size", default=32))
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
    h, w = size_pair(v.image_size)
    x["pixel_values"] = torch.randn(BATCH, int(v.num_frames), int(v.num_channels), h, w, generator=g)
    if "input_ids" not in x:
        x["input_ids"] = token_ids(cfg, (BATCH, SEQ), g)
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
    h, w = size_pair(cfg.image_size)
    for name in ("pixel_values", "prompt_pixel_values", "prompt_masks"):
        x[name] = torch.randn(BATCH, int(cfg.num_channels), h // 2, w, generator=g)


def _query_placeholders(x, cfg, g, token, frames=0):
    # BLIP-2-style processors put num_query_tokens placeholders per image (per frame for video:
    # four frames per clip) ahead of the text.
    if frames:
        h, w = size_pair(cfg.vision_config.image_size)
        x["pixel_values"] = torch.randn(BATCH, frames, 3, h, w, generator=g)
    if "input_ids" not in x:
        x["input_ids"] = token_ids(cfg, (BATCH, SEQ), g)
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
    x["pixel_values"] = torch.randn(1, int(first(cfg, "num_channels", default=3)), patch, BATCH * h * w * patch, generator=g)
    x["target_sizes"] = torch.tensor([[h, w]] * BATCH, dtype=torch.int32)


def _kimi_k25_vision(x, cfg, g):
    # Kimi-K2.5's image processor keeps each patch as a (channels, patch, patch) image for the
    # convolutional patch embedding, one row per patch of every image's (t, h, w) grid.
    patch = int(cfg.patch_size)
    grid = torch.tensor([GRID] * BATCH)
    x["grid_thw"] = grid
    x["pixel_values"] = torch.randn(int(grid.prod(-1).sum()), channels(cfg), patch, patch, generator=g)
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
    x["tasks_input_ids"] = token_ids(cfg, (BATCH, SEQ), g)
    x["tasks_attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
    x["classes_input_ids"] = token_ids(cfg, (BATCH * classes, SEQ // 2), g)
    mask = torch.ones(BATCH * classes, SEQ // 2, dtype=torch.long)
    mask[-1, -1:] = 0  # a shorter class name
    x["classes_attention_mask"] = mask
    x["classes_structure"] = torch.full((BATCH,), classes, dtype=torch.long)


def _pi0(x, cfg, g):
    # PI0Model: the prefix as PI0Processor builds it (one camera image, its image tokens, then the
    # prompt) and the suffix of embedded state and noisy action chunk that the policy head makes
    # (one state token and chunk_size action tokens).
    vlm = cfg.vlm_config
    h, w = size_pair(vlm.vision_config.image_size)
    patch = int(vlm.vision_config.patch_size)
    image_tokens = (h // patch) * (w // patch)
    text = token_ids(cfg, (BATCH, SEQ), g)
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
    x["input_features"] = torch.randn(BATCH, 16, 4 * int(first(cfg, "num_mel_bins")), generator=g)


def _dia(x, cfg, g):
    # DiaProcessor: the decoder reads audio codes as (batch, frames, num_channels), one column per
    # codebook.
    dec = cfg.decoder_config
    x["decoder_input_ids"] = token_ids(dec, (BATCH, DEC_SEQ, int(dec.num_channels)), g)


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
    width = int(first(cfg.semantic_model_config, "feature_projection_input_dim"))
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
    x["pixel_values"] = torch.rand(int(grid.prod(-1).sum()), side, side, channels(cfg), generator=g) * 2 - 1


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
