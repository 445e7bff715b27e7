# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Projected forward latency of Hugging Face encoders on the trn1 profile against AWS's published p50.

The setup follows the published rows: one NeuronCore, sequence length 128, fp32 weights with
matmuls cast to bf16 (here ``torch.autocast("neuron", torch.bfloat16)``, which casts the
matmul-class ops), the raw AutoModel output. Weights are random (a config, not a checkpoint):
latency does not depend on their values. Each model runs eager and compiled with
``backend="neuron"``; the projected latency is the simulated device time of one forward
(``torch_neuron.projection.region``), the median over the measured forwards after a warm-up one.

Published figures: AWS Neuron documentation, "Trn1/Trn1n Inference Performance",
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/benchmarks/trn1/trn1-inference-performance.html
(trn1.2xlarge, PyTorch 2.9 / Neuron 2.27; DistilBERT batch 16: PyTorch 2.8 / Neuron 2.26): the
"Real Time" table at batch 1 and the "Batch" table (data parallel over the instance's two
NeuronCores: its p50 is one core's latency at that batch).

    NEURON_SIM_PROFILE=trn1 python tools/bench/bert_trn1.py            # every row
    python tools/bench/bert_trn1.py --rows bert-base:1 --modes compiled
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

os.environ.setdefault("NEURON_SIM_PROFILE", "trn1")

import torch  # noqa: E402
import torch_neuron  # noqa: E402
import torch_neuron.projection  # noqa: E402

TARGET = 0.25  # |projected / published - 1|

# name: (transformers config class, config kwargs). Sizes of the public checkpoints' configs.
MODELS = {
    "bert-large": ("BertConfig", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                      intermediate_size=4096)),
    "bert-base": ("BertConfig", dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                     intermediate_size=3072)),
    "distilbert": ("DistilBertConfig", dict(dim=768, n_layers=6, n_heads=12, hidden_dim=3072)),
}
# (model, batch): published p50 ms and the table it comes from.
PUBLISHED = {
    ("bert-large", 1): (2.669, "Real Time, bert-large-uncased"),
    ("bert-large", 4): (7.24, "Batch, bert-large-uncased"),
    ("bert-base", 1): (0.943, "Real Time, bert-base-uncased"),
    ("bert-base", 16): (9.34, "Batch, bert-base-uncased"),
    ("distilbert", 1): (0.543, "Real Time, distilbert-base-uncased"),
    ("distilbert", 16): (5.07, "Batch, distilbert-base-uncased"),
}
SEQ = 128


def build(name: str) -> torch.nn.Module:
    import transformers
    cls_name, kw = MODELS[name]
    cfg = getattr(transformers, cls_name)(**kw)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(cfg).eval()


def forward_ms(model, ids, mask, repeats: int) -> tuple[float, dict]:
    """Median projected device time of one forward (ms) and the last forward's projection summary."""
    times, summary = [], None
    with torch.inference_mode(), torch.autocast("neuron", dtype=torch.bfloat16):
        model(input_ids=ids, attention_mask=mask)  # warm-up: compile, kernel decisions
        for _ in range(repeats):
            with torch_neuron.projection.Region(name="forward", record=False) as proj:
                model(input_ids=ids, attention_mask=mask)
                proj.step()
            summary = proj.summary
            times.append(summary["step_time_ms"])
    return statistics.median(times), summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", help="comma-separated model:batch (default: every published row)")
    ap.add_argument("--modes", default="eager,compiled", help="eager, compiled or both")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a compiled row misses the target")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=torch_neuron.FallbackWarning)
    rows = ([(r.split(":")[0], int(r.split(":")[1])) for r in args.rows.split(",")] if args.rows
            else list(PUBLISHED))
    modes = args.modes.split(",")
    props = torch.neuron.get_device_properties(0)
    print(f"profile {os.environ['NEURON_SIM_PROFILE']}, one NeuronCore ({props.name}), seq {SEQ}, "
          "fp32 weights, matmuls autocast to bf16")
    header = f"{'model':<11} {'batch':>5} {'published':>10}" + "".join(f" {m + ' ms':>12} {'error':>7}" for m in modes)
    print(header + "   kinds of device time (compiled)")
    missed = 0
    for name, batch in rows:
        published, table = PUBLISHED[(name, batch)]
        eager = build(name).to("neuron")
        g = torch.Generator().manual_seed(batch)
        ids = torch.randint(0, 30000, (batch, SEQ), generator=g).to("neuron")
        mask = torch.ones(batch, SEQ, dtype=torch.long, device="neuron")
        line = f"{name:<11} {batch:>5} {published:>10.3f}"
        detail = ""
        for mode in modes:
            model = torch.compile(eager, backend="neuron") if mode == "compiled" else eager
            ms, summary = forward_ms(model, ids, mask, args.repeats)
            err = ms / published - 1
            line += f" {ms:>12.3f} {err:>+7.1%}"
            if mode == "compiled":
                missed += abs(err) > TARGET
                total = sum(summary["by_model_ms"].values()) or 1.0
                detail = ", ".join(f"{k} {v / total:.0%}" for k, v in summary["by_model_ms"].items())
        print(line + "   " + detail, flush=True)
        del eager
        torch._dynamo.reset()
    print(f"published: {PUBLISHED[rows[0]][1].split(',')[0]} / Batch tables of the AWS Neuron trn1 inference "
          "performance page (see the module docstring); target |error| <= 25%")
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
