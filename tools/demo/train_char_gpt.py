# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Train a small character-level GPT on `neuron` and on CPU, side by side.

Both runs start from one CPU-initialised model and see the same batches, so the
per-step losses must agree. The script prints them next to each other with the
host wall time of each step, the projected trn2 device time of each step (from
`torch.neuron.Event` timing and the simulated device clock), and which ATen ops
ran as host fallbacks. It exits non-zero when the losses disagree beyond the
printed tolerance.

    python tools/demo/train_char_gpt.py                 # 30 steps, fp32
    python tools/demo/train_char_gpt.py --amp           # bf16 autocast on both
    python tools/demo/train_char_gpt.py --device-only   # neuron only, no CPU twin
    python tools/demo/train_char_gpt.py --compile       # the neuron model and optimizer step under torch.compile
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import string
import sys
import sysconfig
import time
from dataclasses import dataclass

# The fallback summary at the end lists every host fallback with its count; the one
# first-fallback warning would only announce it. Set before torch autoloads the backend.
os.environ.setdefault("TORCH_NEURON_FALLBACK_WARN", "0")

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

# A fixed list keeps the corpus identical across runs and machines with the same
# Python version; files missing from an unusual stdlib are skipped.
CORPUS_FILES = (
    "abc.py", "bisect.py", "calendar.py", "colorsys.py", "contextlib.py",
    "copy.py", "dataclasses.py", "fnmatch.py", "functools.py", "heapq.py",
    "keyword.py", "operator.py", "queue.py", "random.py", "shlex.py",
    "string.py", "textwrap.py", "types.py", "weakref.py",
)
CORPUS_MAX_CHARS = 400_000

# Fixed vocabulary (printable ASCII minus the rare vertical whitespace) so the
# model shape does not depend on which files were found; id 0 is "unknown".
VOCAB = ["\0"] + sorted(set(string.printable) - set("\x0b\x0c\r"))
STOI = {ch: i for i, ch in enumerate(VOCAB)}


def load_corpus(max_chars: int = CORPUS_MAX_CHARS) -> tuple[torch.Tensor, list[str]]:
    """Encode the chosen standard-library sources of the running interpreter."""
    stdlib = sysconfig.get_paths()["stdlib"]
    used, parts, total = [], [], 0
    for name in CORPUS_FILES:
        path = os.path.join(stdlib, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        parts.append(text)
        used.append(name)
        total += len(text)
        if total >= max_chars:
            break
    text = "\n".join(parts)[:max_chars]
    if len(text) < 10_000:
        raise RuntimeError(f"corpus too small ({len(text)} chars) under {stdlib}; files found: {used}")
    ids = torch.tensor([STOI.get(ch, 0) for ch in text], dtype=torch.long)
    return ids, used


class CharDataset(Dataset):
    """Every window of `seq_len + 1` characters: input and next-character target."""

    def __init__(self, ids: torch.Tensor, seq_len: int):
        self.ids = ids
        self.seq_len = seq_len

    def __len__(self) -> int:
        return self.ids.numel() - self.seq_len - 1

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.ids[i : i + self.seq_len + 1]
        return chunk[:-1], chunk[1:]


@dataclass
class GPTConfig:
    vocab_size: int = len(VOCAB)
    seq_len: int = 64
    d_model: int = 96
    n_heads: int = 4
    n_layers: int = 3
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(approximate="tanh"),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith(("proj.weight", "mlp.2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def make_optimizer(model: nn.Module, lr: float = 2e-3) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def make_loader(ids: torch.Tensor, cfg: GPTConfig, batch: int, seed: int, pin: bool) -> DataLoader:
    gen = torch.Generator().manual_seed(seed)
    return DataLoader(CharDataset(ids, cfg.seq_len), batch_size=batch, shuffle=True,
                      drop_last=True, generator=gen, pin_memory=pin)


def train_step(model, opt, x, y, amp: bool, forward=None, opt_step=None) -> torch.Tensor:
    """One ordinary training step; returns the (device) loss without syncing. ``forward`` and
    ``opt_step``: the model's and the optimizer step's compiled forms, when the run compiles."""
    device_type = x.device.type
    with torch.autocast(device_type, dtype=torch.bfloat16, enabled=amp):
        logits = (model if forward is None else forward)(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    (opt_step or opt.step)()
    return loss


def build_pair(cfg: GPTConfig, seed: int, device: str) -> tuple[nn.Module, nn.Module]:
    """A CPU model and an exact copy on `device` (initialised on CPU so both start equal)."""
    torch.manual_seed(seed)
    cpu_model = CharGPT(cfg)
    dev_model = copy.deepcopy(cpu_model).to(device)
    if dev_model.lm_head.weight is not dev_model.tok_emb.weight:
        raise RuntimeError(f"model.to({device!r}) untied lm_head.weight from tok_emb.weight")
    return cpu_model, dev_model


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


class DeviceTimer:
    """Simulated device time of a step, read two ways: events and the device clock."""

    def __init__(self, device: torch.device):
        self.device = device
        self.on = device.type == "neuron"
        if self.on:
            import torch_neuron

            self._clock = lambda: torch_neuron.device_time_ns(device)

    def start(self):
        if not self.on:
            return None
        ev0 = torch.neuron.Event(enable_timing=True)
        ev0.record()
        return ev0, self._clock()

    def stop(self, token):
        if not self.on:
            return float("nan"), float("nan")
        ev0, t0 = token
        ev1 = torch.neuron.Event(enable_timing=True)
        ev1.record()
        ev1.synchronize()
        return ev0.elapsed_time(ev1), (self._clock() - t0) / 1e6


def fallback_summary(top: int = 8) -> list[str]:
    import torch_neuron

    executed = torch_neuron.get_executed_ops()
    fallback = torch_neuron.get_fallback_ops()
    n_native = sum(v.get("native", 0) for v in executed.values())
    n_fb = sum(v.get("fallback", 0) for v in executed.values())
    lines = [(f"ops executed: {n_native + n_fb}  native: {n_native}  host fallback: {n_fb}"
              f"  ({len(fallback)} distinct ops fell back)")]
    for name, count in sorted(fallback.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        lines.append(f"  {count:>8}  {name}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=96)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--amp", action="store_true", help="bf16 autocast on both devices")
    ap.add_argument("--device-only", action="store_true", help="train on the device only (no CPU twin)")
    ap.add_argument("--compile", action="store_true",
                    help="run the device model and its optimizer step under torch.compile(backend='neuron') "
                         "(the CPU twin stays eager)")
    ap.add_argument("--device", default="neuron", help="device to compare with CPU (default: neuron)")
    ap.add_argument("--tol", type=float, default=None,
                    help="max allowed |loss difference| (default 1e-3 fp32, 0.2 with --amp)")
    args = ap.parse_args(argv)
    # Under bf16 autocast CPU follows its own cast lists and neuron follows CUDA's, so the
    # runs agree only to bf16 rounding, which training amplifies step by step.
    tol = args.tol if args.tol is not None else (0.2 if args.amp else 1e-3)

    device = torch.device(args.device)
    if device.index is None and device.type != "cpu":
        device = torch.device(device.type, 0)
    cfg = GPTConfig(seq_len=args.seq, d_model=args.d_model, n_heads=args.heads, n_layers=args.layers)
    ids, files = load_corpus()
    cpu_model, dev_model = build_pair(cfg, args.seed, str(device))
    cpu_opt, dev_opt = make_optimizer(cpu_model, args.lr), make_optimizer(dev_model, args.lr)
    loader = make_loader(ids, cfg, args.batch, args.seed, pin=device.type != "cpu")
    if device.type == "neuron":
        torch.neuron.set_device(device)  # events and streams below belong to the current device
    timer = DeviceTimer(device)
    dev_forward = dev_opt_step = None
    if args.compile:
        # The model, and the optimizer step as PyTorch documents compiling it (a function calling
        # opt.step()): each parameter's AdamW update becomes one fused kernel.
        dev_forward = torch.compile(dev_model, backend="neuron")
        dev_opt_step = torch.compile(lambda: dev_opt.step(), backend="neuron")
    n_params = sum(p.numel() for p in dev_model.parameters())

    print(f"char-GPT: {cfg.n_layers} layers, d_model {cfg.d_model}, {cfg.n_heads} heads, seq {cfg.seq_len}, "
          f"batch {args.batch}, {n_params / 1e3:.1f}k params, vocab {cfg.vocab_size}, "
          f"{'bf16 autocast' if args.amp else 'fp32'}{', compiled (backend neuron)' if args.compile else ''}")
    print(f"corpus: {ids.numel()} chars from {len(files)} stdlib files ({files[0]} .. {files[-1]})")
    if timer.on:
        import torch_neuron

        props = torch.neuron.get_device_properties(device.index)
        print(f"device: {device} = {props.name}, {props.total_memory / 2**30:.1f} GiB HBM")
        torch_neuron.clear_op_tracking()
        torch.neuron.reset_peak_memory_stats(device)
    print()

    # wall: host time of the step on each device; dev: simulated device time of the
    # neuron step, from events (ev) and from the device clock (clk)
    cols = ["step", "loss cpu", f"loss {device.type}", "|diff|", "wall cpu", f"wall {device.type}",
            "dev ms(ev)", "dev ms(clk)"]
    print("{:>4} {:>9} {:>11} {:>9} {:>9} {:>11} {:>10} {:>11}".format(*cols))
    rows = []
    it = iter(loader)
    projection = None
    if timer.on:
        import torch_neuron.projection

        # The projection covers the steady steps; the first includes one-time setup.
        head = cfg.d_model // cfg.n_heads
        n_body = n_params - dev_model.tok_emb.weight.numel()
        per_token = torch_neuron.projection.transformer_flops_per_token(n_body, cfg.n_layers, cfg.n_heads, head,
                                                                        cfg.seq_len)
        projection = torch_neuron.projection.region(device.index, name="char-GPT training", assumptions=(
            torch_neuron.projection.Assumptions(model_flops_per_step=per_token * args.batch * cfg.seq_len,
                                                model_flops_source="6N + 12*L*H*Q*T per token (PaLM), "
                                                                   "N without the tied embedding")))
    for step in range(args.steps):
        if projection is not None and step == min(1, args.steps - 1):
            projection.__enter__()
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        cpu_loss = cpu_ms = float("nan")
        if not args.device_only:
            t = time.perf_counter()
            cpu_loss = train_step(cpu_model, cpu_opt, x, y, args.amp).item()
            cpu_ms = (time.perf_counter() - t) * 1e3
        t = time.perf_counter()
        token = timer.start()
        xd, yd = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        dev_loss = train_step(dev_model, dev_opt, xd, yd, args.amp, dev_forward, dev_opt_step).item()
        ev_ms, clk_ms = timer.stop(token)
        dev_ms = (time.perf_counter() - t) * 1e3
        diff = abs(cpu_loss - dev_loss)
        rows.append((cpu_loss, dev_loss, diff, cpu_ms, dev_ms, ev_ms, clk_ms))
        print(f"{step:>4} {cpu_loss:>9.5f} {dev_loss:>11.5f} {diff:>9.2e} {cpu_ms:>9.1f} {dev_ms:>11.1f} "
              f"{ev_ms:>10.3f} {clk_ms:>11.3f}")
        if projection is not None and step >= min(1, args.steps - 1):
            projection.step()
    if projection is not None:
        projection.__exit__(None, None, None)

    steady = rows[1:] if len(rows) > 1 else rows  # the first step includes one-time setup
    print()
    ok = True
    if not args.device_only:
        max_diff = max(r[2] for r in rows)
        ok = math.isfinite(max_diff) and max_diff <= tol
        ratio = _median([r[4] / r[3] for r in steady])
        print(f"max |loss diff| cpu vs {device.type}: {max_diff:.3e}  (tolerance {tol:.1e})  "
              f"{'OK' if ok else 'FAIL'}")
        print(f"wall time per step: cpu {_median([r[3] for r in steady]):.1f} ms, "
              f"{device.type} {_median([r[4] for r in steady]):.1f} ms, "
              f"ratio {device.type}/cpu (median over steps) {ratio:.2f}")
    else:
        print(f"wall time per step: {device.type} {_median([r[4] for r in steady]):.1f} ms")
    if not all(math.isfinite(r[1]) for r in rows):
        print(f"non-finite loss on {device.type}")
        ok = False
    if timer.on:
        ev = _median([r[5] for r in steady])
        clk = _median([r[6] for r in steady])
        tokens = args.batch * cfg.seq_len
        print(f"device time per step on {props.name}: {ev:.3f} ms (events), "
              f"{clk:.3f} ms (device clock); {tokens / (clk / 1e3):,.0f} tokens/s")
        print(projection.text())
        if args.compile:
            s = torch_neuron.compile_stats()
            print(f"compiled: {s['graphs']} graph(s), {s['partitions']} AOT partitions, {len(s['fused_kernels'])} "
                  f"fused kernels, {s['eager_nodes']} eager and {s['fallback_nodes']} fallback nodes; first step "
                  f"includes {sum(s['stage_seconds'].values()):.1f} s of backend stages")
            for k in s["fused_kernels"][:6]:
                print(f"  {k['name']}: {k['ops']}")
        print("op executions on the device (host fallbacks by count):")
        for line in fallback_summary():
            print("  " + line)
    print(f"first loss {rows[0][1]:.4f} -> last loss {rows[-1][1]:.4f} on {device.type}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
