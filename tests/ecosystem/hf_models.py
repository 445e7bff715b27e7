"""Tiny Hugging Face models built from configs (no downloads) and synthetic data, shared by the
in-process tests and the multi-process workers so both build the very same runs."""
from __future__ import annotations

import torch

VOCAB = 96
SEQ = 16


def tiny_config(kind: str):
    # Dropout 0: the runs compared here must be deterministic functions of the seed.
    if kind == "gpt2":
        from transformers import GPT2Config
        return GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=1)
    if kind == "llama":
        from transformers import LlamaConfig
        return LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                           attention_dropout=0.0, bos_token_id=0, eos_token_id=1, pad_token_id=1)
    raise ValueError(f"unknown tiny model {kind!r}")


def tiny_model(kind: str, seed: int = 0):
    """A randomly initialised causal LM on CPU; the same seed gives the same weights."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(tiny_config(kind), attn_implementation="sdpa").eval()


class ArithmeticSequences(torch.utils.data.Dataset):
    """Token sequences x[t+1] = (x[t] + step) mod VOCAB: learnable, so losses move during training."""

    def __init__(self, n: int, seed: int = 1):
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(2, VOCAB, (n, 1), generator=g)
        step = torch.randint(1, 7, (n, 1), generator=g)
        self.ids = (start + step * torch.arange(SEQ)) % VOCAB

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


# Trainer runs compared across process counts: the same global batch of GLOBAL_BATCH examples.
GLOBAL_BATCH = 8
TRAIN_STEPS = 4


def trainer_arguments(output_dir: str, world_size: int, **overrides):
    from transformers import TrainingArguments
    kwargs = {
        "output_dir": output_dir, "per_device_train_batch_size": GLOBAL_BATCH // world_size,
        "max_steps": TRAIN_STEPS, "learning_rate": 3e-3, "logging_steps": 1, "seed": 0, "report_to": "none",
        "save_strategy": "no", "dataloader_num_workers": 0, "disable_tqdm": True}
    return TrainingArguments(**{**kwargs, **overrides})


def train(kind: str, args):
    """Trains a tiny model with the Trainer; returns (trainer, the logged loss and gradient norm per step)."""
    from transformers import Trainer
    trainer = Trainer(model=tiny_model(kind).train(), args=args,
                      train_dataset=ArithmeticSequences(GLOBAL_BATCH * TRAIN_STEPS))
    trainer.train()
    logged = {key: [entry[key] for entry in trainer.state.log_history if "loss" in entry]
              for key in ("loss", "grad_norm")}
    return trainer, logged
