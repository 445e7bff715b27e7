"""The environment variables torch_neuron reads, in one typed registry.

Each entry: name, type, default, meaning. Values are read when used (at import
for the policy switches, which can also be changed at run time with the
functions named in the meaning). The simulated device's own variables are in
neuron_sim's registry (``neuron-ls --env``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    type: str
    default: str
    meaning: str
    choices: tuple[str, ...] = ()  # type "choice": the accepted values


REGISTRY: tuple[EnvVar, ...] = (
    EnvVar("TORCH_NEURON_STRICT", "bool", "0",
           "1: an op with no native neuron kernel raises instead of running on the host "
           "(also torch_neuron.set_strict())."),
    EnvVar("TORCH_NEURON_FALLBACK_WARN", "choice", "once",
           "once (or 1): the first op of the process that runs on the host (fallback) warns, "
           "once, at the user's line; later fallbacks are only counted "
           "(torch_neuron.get_fallback_ops()). op: one warning per op, when it first runs on "
           "the host. 0: silent. Ops run by tensor printing never warn "
           "(also torch_neuron.set_fallback_warnings()).",
           choices=("once", "op", "0")),
    EnvVar("TORCH_NEURON_DEVICE_NUMERICS", "bool", "0",
           "1: native ops take their values from their tile kernels run by the ISA simulator "
           "instead of the host reference path (much slower; read at import, also "
           "torch_neuron.set_device_numerics())."),
    EnvVar("TORCH_NEURON_BACKWARD_ON_CALLER", "bool", "1",
           "1: backward runs on the thread that calls it (the simulated device executes on the "
           "host, so autograd's per-device worker thread would only add hand-offs and a second "
           "OpenMP team competing for the cores); 0: autograd's device worker threads, as for "
           "CUDA. Read at import; applies to the importing thread "
           "(torch.autograd.set_multithreading_enabled changes it per thread)."),
    EnvVar("TORCH_NEURON_DISABLE_WORKAROUNDS", "bool", "0",
           "1: do not apply torch_neuron's runtime workarounds for known torch bugs "
           "(see patches/README.md)."),
    EnvVar("TORCH_NEURON_COMPILE_CACHE_DIR", "path", "~/.cache/torch_neuron/compile",
           "where torch.compile(backend='neuron') keeps generated kernels (source and simulated "
           "schedule), keyed by compile options and chain; options={'cache': False} bypasses it."),
    EnvVar("TORCH_NEURON_SANITIZE", "choice", "0",
           "raise (or 1): the stream-race sanitizer checks every op on neuron tensors of the "
           "importing thread (reads and writes per stream, events, wait_stream, synchronize, "
           "record_stream, allocator reuse) and raises torch_neuron.sanitizer.StreamRaceError "
           "with both ops and stacks on a race; warn: a StreamRaceWarning instead; 0: off (no "
           "cost). Read at import (also torch_neuron.sanitizer.enable()/disable()).",
           choices=("0", "raise", "warn")),
    EnvVar("TORCH_NEURON_SHAPE_ONLY", "bool", "0",
           "1: the process runs shape-only (torch_neuron.projection.shape_only): every op on neuron is "
           "decided and costed as when it executes, but only small results of operands with values, "
           "factory ops and host-to-device copies compute values; the rest read as zeros. The projection "
           "report is printed when the process ends. Read at import."),
    EnvVar("TORCH_NEURON_MODEL_FLOPS", "float", "(unset)",
           "model flops per step for the MFU of shape-only runs (set by `python -m torch_neuron.projection "
           "--model-flops`); unset: the counted flops of the launches."),
    EnvVar("LOCAL_RANK", "int", "(unset)",
           "set by torchrun: the c10d backend 'neuron' binds the process to neuron:(LOCAL_RANK % device_count)."),
    EnvVar("TORCH_DEVICE_BACKEND_AUTOLOAD", "bool", "1",
           "torch's switch: 0 stops `import torch` from loading torch_neuron automatically."),
)

_BY_NAME = {v.name: v for v in REGISTRY}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def get_bool(name: str) -> bool:
    var = _BY_NAME[name]
    raw = os.environ.get(name, var.default).strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{name}={os.environ.get(name)!r} is not a boolean; use 0 or 1 ({var.meaning})")


def get_choice(name: str, aliases: dict[str, str] | None = None) -> str:
    """A "choice" variable's value, lower-cased; ``aliases`` maps other spellings to a choice."""
    var = _BY_NAME[name]
    raw = os.environ.get(name, var.default).strip().lower()
    raw = (aliases or {}).get(raw, raw)
    if raw in var.choices:
        return raw
    raise ValueError(f"{name}={os.environ.get(name)!r} is not one of {', '.join(var.choices)} ({var.meaning})")


def main(argv: list[str] | None = None) -> int:
    """``python -m torch_neuron.env [--markdown]``: print the registry."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if "--markdown" in args:
        print(markdown_table())
    else:
        for v in REGISTRY:
            print(f"{v.name}={os.environ.get(v.name, v.default)}  ({v.type}; default {v.default}) {v.meaning}")
    return 0


def markdown_table() -> str:
    lines = ["| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
    for v in REGISTRY:
        lines.append(f"| `{v.name}` | {v.type} | `{v.default}` | {v.meaning} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
