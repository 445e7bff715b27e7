# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The backend's options: one frozen, hashable object, read from torch.compile's mode= or options=.

Its ``key()`` is part of every cache key (generated kernels on disk), so two compilations
share kernels only when every option that shapes them agrees.
"""
from __future__ import annotations

import dataclasses
import hashlib

# torch.compile's modes; none changes what this backend generates (see README: "torch.compile").
MODES = {
    "default": "fuse pointwise/reduction chains, min-cut rematerialization",
    "reduce-overhead": "same as default: there are no CUDA graphs to capture; launches are already "
                       "cut by fusion",
    "max-autotune": "same as default: the generated tile kernels have one schedule, nothing to tune",
    "max-autotune-no-cudagraphs": "same as max-autotune",
}


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    fusion: bool = True            # pointwise/reduction chains become one generated tile kernel each
    partitioner: str = "min_cut"   # "min_cut" (recompute cheap ops in backward) or "default" (save all)
    min_chain: int = 2             # fewest fused ops worth a generated kernel (one op runs as its eager kernel)
    profitability: bool = True     # keep a chain eager (or its matmul unfused) when the eager kernels are faster
    cache: bool = True             # generated kernels cached on disk (TORCH_NEURON_COMPILE_CACHE_DIR)
    dump_dir: str = ""             # non-empty: write each pass's output there (graphs, chains, kernel source)
    freeze_parameters: bool = True  # inference graphs: parameter-only work runs once per parameter version (freeze)
    graph_launch: bool = True      # each graph is one launch (one NEFF) scheduled across its kernels (neff)
    sbuf_residency: bool = True    # in a graph launch, intermediates that fit stay in SBUF between kernels
    mode: str = "default"

    def __post_init__(self):
        if self.partitioner not in ("min_cut", "default"):
            raise ValueError(f"torch.compile(backend='neuron'): options['partitioner']={self.partitioner!r}; "
                             "valid: 'min_cut', 'default'")
        if not isinstance(self.min_chain, int) or self.min_chain < 1:
            raise ValueError(f"torch.compile(backend='neuron'): options['min_chain']={self.min_chain!r}; "
                             "it must be an int >= 1")
        if self.mode not in MODES:
            raise ValueError(f"torch.compile(backend='neuron', mode={self.mode!r}): unknown mode; valid modes: "
                             f"{', '.join(MODES)}")

    def key(self) -> str:
        """Stable across processes: the fields that shape generated kernels (dump_dir does not)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in ("dump_dir", "cache", "graph_launch", "sbuf_residency")}
        return hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()[:16]


def valid_options() -> list[str]:
    return [f.name for f in dataclasses.fields(CompileOptions) if f.name != "mode"]


def from_compile_kwargs(mode: str | None = None, options: dict | None = None, **extra) -> CompileOptions:
    """The options of one torch.compile call (it passes mode= only when not "default", options= only
    when given; both together is rejected by torch.compile itself)."""
    if extra:
        raise TypeError(f"torch.compile(backend='neuron'): unexpected backend arguments {sorted(extra)}")
    options = dict(options or {})
    unknown = sorted(set(options) - set(valid_options()))
    if unknown:
        raise ValueError(f"torch.compile(backend='neuron'): unknown option(s) {unknown}; valid options: "
                         f"{', '.join(valid_options())} (mode= takes {', '.join(MODES)})")
    for name, value in options.items():
        want = type(getattr(CompileOptions, name))
        if want is bool and not isinstance(value, bool) or want is str and not isinstance(value, str) \
                or want is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"torch.compile(backend='neuron'): options[{name!r}]={value!r} must be a {want.__name__}")
    return CompileOptions(mode=mode or "default", **options)
