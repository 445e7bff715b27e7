"""Local stand-ins for the tokenizer and the ``c4_test`` dataset that torchtitan's
debug config reads from its source tree (the wheel ships neither).

The text is a seeded Markov language (each word has a few likely successors), so a
tiny model's loss falls within a few steps. The tokenizer is a byte-level BPE trained
on that text with the ``tokenizers`` library, saved as ``tokenizer.json`` plus
``tokenizer_config.json`` (BOS/EOS), the layout ``HuggingFaceTokenizer`` loads.

The dataset is JSON lines with a ``text`` field, what ``load_dataset(path,
split="train")`` accepts. torchtitan packs documents into ``seq_len`` windows and
gives each data-parallel rank a contiguous shard of the documents, so a run with
more data-parallel ranks sees a different global batch from the same file. Here every
packed window is a group of documents whose tokens fill exactly ``seq_len``, and one
file per data-parallel degree orders the same windows so that step ``k`` of every
layout trains on the same global batch.
"""
from __future__ import annotations

import json
import os
import random

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
DOCS_PER_WINDOW = 2  # two documents per window, so block-causal masking matters


def _lexicon(rng: random.Random, n_words: int) -> list[str]:
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < n_words:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))))
    return sorted(words)


class MarkovText:
    """Words drawn from a fixed successor table: learnable structure, deterministic per seed."""

    def __init__(self, seed: int, n_words: int = 160, fanout: int = 3):
        self.rng = random.Random(seed)
        self.words = _lexicon(self.rng, n_words)
        self.successors = {w: self.rng.sample(self.words, fanout) for w in self.words}

    def words_after(self, first: str, n: int) -> list[str]:
        out = [first]
        while len(out) < n:
            out.append(self.rng.choice(self.successors[out[-1]]))
        return out

    def sentence(self, n: int) -> str:
        return " ".join(self.words_after(self.rng.choice(self.words), n))


def build_tokenizer(out_dir: str, text: MarkovText, vocab_size: int = 512) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    # add_prefix_space: every word is " w", so a text's token count is the sum over its words
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator((text.sentence(40) for _ in range(2000)), trainer=trainer)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": False,
                   "add_eos_token": False, "model_max_length": 1 << 20}, f, indent=1)


class _ExactLengthDocs:
    """Documents of an exact token count under a given tokenizer."""

    def __init__(self, tokenizer, text: MarkovText):
        self.tok = tokenizer
        self.text = text
        self.cost = {w: len(tokenizer.encode(w).ids) for w in text.words}

    def doc(self, n_tokens: int) -> str:
        rng, succ = self.text.rng, self.text.successors
        for _ in range(100):
            words = [rng.choice(self.text.words)]
            used = self.cost[words[0]]
            while used < n_tokens:
                gap = n_tokens - used
                options = [w for w in succ[words[-1]] if self.cost[w] <= gap]
                if not options:  # close the gap with any word that fits exactly
                    options = [w for w in self.text.words if self.cost[w] == gap] or \
                              [w for w in self.text.words if self.cost[w] < gap]
                if not options:
                    break
                w = rng.choice(options)
                words.append(w)
                used += self.cost[w]
            s = " ".join(words)
            if len(self.tok.encode(s).ids) == n_tokens:
                return s
        raise RuntimeError(f"could not build a document of exactly {n_tokens} tokens")


def build_windows(tokenizer_dir: str, text: MarkovText, seq_len: int, n_windows: int) -> list[list[str]]:
    """``n_windows`` groups of documents; each group packs into exactly one ``seq_len`` window.

    torchtitan encodes a document with BOS and EOS and shifts inputs/labels inside it, so a
    document of ``t`` text tokens fills ``t + 1`` window positions.
    """
    from tokenizers import Tokenizer

    docs = _ExactLengthDocs(Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json")), text)
    rng = text.rng
    windows = []
    for _ in range(n_windows):
        sizes, left = [], seq_len
        for i in range(DOCS_PER_WINDOW - 1):
            s = rng.randint(seq_len // 4, seq_len // 2)
            sizes.append(s)
            left -= s
        sizes.append(left)
        windows.append([docs.doc(s - 1) for s in sizes])
    return windows


def write_layout(path: str, windows: list[list[str]], dp_degree: int, local_batch: int) -> None:
    """One JSON-lines file ordered so that ``dp_degree`` contiguous shards, read ``local_batch``
    windows per step, give step ``k`` the windows ``k*G .. k*G+G-1`` (``G = dp_degree*local_batch``)."""
    g = dp_degree * local_batch
    if len(windows) % g:
        raise ValueError(f"{len(windows)} windows do not split into global batches of {g}")
    steps = len(windows) // g
    order = [(k * dp_degree + r) * local_batch + j
             for r in range(dp_degree) for k in range(steps) for j in range(local_batch)]
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "data.jsonl"), "w") as f:
        for i in order:
            f.writelines(json.dumps({"text": doc}) + "\n" for doc in windows[i])


def build_assets(root: str, *, seq_len: int, global_batch: int, steps: int,
                 dp_degrees: tuple[int, ...], seed: int = 0) -> dict[str, str]:
    """Tokenizer in ``root/tokenizer``; one dataset per data-parallel degree in ``root/dp<N>``.

    Two spare global batches follow the trained ones: the loader reads ahead.
    """
    text = MarkovText(seed)
    tok_dir = os.path.join(root, "tokenizer")
    build_tokenizer(tok_dir, text)
    windows = build_windows(tok_dir, text, seq_len, (steps + 2) * global_batch)
    paths = {"tokenizer": tok_dir}
    for dp in dp_degrees:
        if global_batch % dp:
            raise ValueError(f"global batch {global_batch} does not split over {dp} ranks")
        paths[f"dp{dp}"] = os.path.join(root, f"dp{dp}")
        write_layout(paths[f"dp{dp}"], windows, dp, global_batch // dp)
    return paths
