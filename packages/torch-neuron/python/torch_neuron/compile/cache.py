# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""On-disk cache of generated kernels: source and simulated schedule, keyed by options and chain.

The key hashes the options' key, the device profile and the chain (which carries the graph's
shapes, dtypes, ops and constants), so a second process compiling the same model reads each
kernel's schedule instead of simulating it again. Entries are small JSON files, written
atomically.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import pathlib
import tempfile

CACHE_ENV = "TORCH_NEURON_COMPILE_CACHE_DIR"  # registered in torch_neuron.env

# An entry holds a generated kernel's source and simulated latency, so it is valid only for the
# code that produced both: the fusion generator, the tile language it emits, and the ISA
# simulator's cost and timing model. Their sources are part of every key, so editing any of them
# invalidates the cache without a hand-kept format number.
_PRODUCERS = ("neuron_kernels.fusion", "neuron_kernels.language", "neuron_sim.isa")


@functools.lru_cache(maxsize=1)
def producers_digest() -> str:
    h = hashlib.sha256()
    for name in _PRODUCERS:
        spec = importlib.util.find_spec(name)
        for root in spec.submodule_search_locations or ():
            for path in sorted(pathlib.Path(root).rglob("*.py")):
                h.update(path.relative_to(root).as_posix().encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def directory() -> str:
    d = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "torch_neuron", "compile")
    return d


def key(options_key: str, profile: str, chain) -> str:
    return hashlib.sha256(f"{producers_digest()}|{options_key}|{profile}|{chain!r}".encode()).hexdigest()


def load(k: str) -> dict | None:
    path = os.path.join(directory(), k[:2], k + ".json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def store(k: str, entry: dict) -> None:
    d = os.path.join(directory(), k[:2])
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, os.path.join(d, k + ".json"))
    except OSError:
        pass  # a read-only or full cache directory only costs the next process a re-simulation

