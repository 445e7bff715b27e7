"""Random number generation state of device ``neuron`` (one default generator per device)."""
from __future__ import annotations

from typing import Iterable, Union

import torch

from .. import _C

_DeviceLike = Union[torch.device, str, int, None]


def _generator(device: _DeviceLike) -> torch.Generator:
    from . import _checked_index

    # torch.cuda indexes its tuple of default generators: IndexError for a missing device.
    return _C._get_default_generator(_checked_index(device, IndexError))


def get_rng_state(device: _DeviceLike = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_C.device_count())]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "neuron") -> None:
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format).cpu())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(_C.device_count()):
        _generator(i).manual_seed(int(seed))


def seed() -> None:
    _generator(None).seed()


def seed_all() -> None:
    s = _generator(0).seed()
    for i in range(1, _C.device_count()):
        _generator(i).manual_seed(s)


def initial_seed() -> int:
    return _generator(None).initial_seed()
