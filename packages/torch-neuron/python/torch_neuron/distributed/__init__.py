"""c10d backend ``"neuron"``: ``torch.distributed`` collectives on ``neuron`` tensors.

Importing this module registers the backend, so that ``init_process_group("neuron")`` and
``init_process_group("cpu:gloo,neuron:neuron")`` work in processes started by ``torchrun``.
Each process drives one device: ``LOCAL_RANK % torch.neuron.device_count()`` when
``LOCAL_RANK`` is set (torchrun sets it), otherwise the current neuron device. The collectives
run in ``neuron_ccl`` (shared memory between the ranks of a host, single copy from device
memory) and are placed on the current neuron stream's simulated timeline.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from .. import _C

BACKEND_NAME = "neuron"


def _backend_class():
    # Bound on first use, not on import: this module may be imported while torch itself is
    # still importing (device-backend autoload), before c10d's types are usable from here.
    _C._distributed._init()
    return _C._distributed.ProcessGroupNeuron


def __getattr__(name):
    if name == "ProcessGroupNeuron":
        return _backend_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def device_for_local_rank() -> int:
    """The neuron device of this process: LOCAL_RANK modulo the device count (torchrun's layout)."""
    count = torch.neuron.device_count()
    local = os.environ.get("LOCAL_RANK")
    if local is None:
        return torch.neuron.current_device()
    if count == 0:
        raise RuntimeError("torch_neuron.distributed: no neuron devices are visible (NEURON_RT_VISIBLE_CORES)")
    return int(local) % count


def _create_backend(dist_opts, backend_options):
    device = device_for_local_rank()
    torch.neuron.set_device(device)
    return _backend_class()(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        dist_opts.timeout,
        device,
        dist_opts.group_id or "default",
    )


def flight_record(group=None) -> str:
    """The last collectives of this rank on ``group`` (default: the world) as text."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("neuron", torch.neuron.current_device()))
    return backend.flight_record()


def register() -> None:
    """Registers the backend (idempotent); done on import."""
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    # devices must be a list: a bare string would be iterated character by character.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["neuron"])


if dist.is_available():
    register()

__all__ = ["BACKEND_NAME", "ProcessGroupNeuron", "device_for_local_rank", "flight_record", "register"]
