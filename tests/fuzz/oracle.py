"""The fuzzer's oracles: one call on CPU and the same call on neuron, and what must hold.

- No crash and no hang: each example runs under a watchdog (faulthandler) that dumps every
  thread's stack and ends the process when the example overruns its time.
- Where CPU raises, neuron raises the same exception type -- or the type CUDA raises, where
  the example says CPU cannot tell (mixed devices, out= on another device).
- Where CPU computes, neuron computes the same values, dtypes and shapes (random ops, whose
  values follow neuron's counter-based generator, and ops returning uninitialised memory are
  compared by dtype and shape only).
- Beyond the device's HBM, neuron raises torch.OutOfMemoryError (CPU is not run).
Each neuron call's op counters say which ops reached a native kernel.
"""
from __future__ import annotations

import faulthandler
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_flatten

import torch_neuron

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))
from tests.upstream import upstream_common as common  # noqa: E402

EXAMPLE_TIMEOUT_S = 60.0
# Ops whose results are uninitialised memory: only dtype, shape and device are compared.
UNINITIALISED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
                 "empty_permuted", "torch.empty", "resize_", "resize_as_"}


@dataclass
class Stats:
    examples: int = 0
    expected_errors: int = 0
    both_computed: int = 0
    oom: int = 0
    native: dict = field(default_factory=dict)     # accounting op -> examples that ran it natively
    findings: list = field(default_factory=list)   # (family, description)

    def count_native(self) -> None:
        for op, c in torch_neuron.get_executed_ops().items():
            if c["native"]:
                self.native[op] = self.native.get(op, 0) + 1


STATS = Stats()


class Finding(AssertionError):
    """A property of the oracle that does not hold for one example."""


def _outcome(thunk: Callable[[], Any]):
    try:
        return thunk(), None
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return None, exc


def _to_cpu(value):
    return common.to_cpu(value)


def _same_structure(actual, expected, what: str, values: bool) -> None:
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        raise Finding(f"{what}: result structure {a_spec} on neuron, {e_spec} on cpu")
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Finding(f"{what}: neuron returned {type(a).__name__} where cpu returned a tensor")
            if (a.dtype, a.shape) != (e.dtype, e.shape):
                raise Finding(f"{what}: neuron result {a.dtype} {list(a.shape)}, cpu {e.dtype} {list(e.shape)}")
    if not values or common._bitwise_equal(actual, expected):
        return
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, check_device=False, check_stride=False)
    except AssertionError as err:
        raise Finding(f"{what}: values differ from cpu: {str(err).splitlines()[0:4]}") from None


def check(family: str, what: str, cpu: Optional[Callable[[], Any]], neuron: Callable[[], Any], *,
          expect: Optional[type] = None, compare_values: bool = True) -> None:
    """Runs one example. ``expect``: the exception type neuron must raise (CUDA's) where CPU
    cannot tell, as for mixed devices; ``cpu`` then runs the all-CPU form of the call, and an
    argument error it raises (TypeError, ValueError: Python's argument parsing, before any
    device check) is what neuron must raise instead. ``cpu=None``: CPU is not run."""
    STATS.examples += 1
    # A hang dumps every thread's stack to stderr and ends the run with an error.
    faulthandler.dump_traceback_later(EXAMPLE_TIMEOUT_S, exit=True)
    try:
        cpu_val, cpu_exc = _outcome(cpu) if cpu is not None else (None, None)
        torch_neuron.clear_op_tracking()
        dev_val, dev_exc = _outcome(neuron)
        ran = torch_neuron.get_executed_ops()
        STATS.count_native()
    finally:
        faulthandler.cancel_dump_traceback_later()
    random = bool(set(ran) & common.RANDOM_KERNELS)
    if expect is not None or cpu_exc is not None:
        # CPU raised, or the example is an error on CUDA whatever CPU does.
        STATS.expected_errors += 1
        wanted = expect or type(cpu_exc)
        if expect is not None and isinstance(cpu_exc, (TypeError, ValueError)):
            wanted = type(cpu_exc)
        if wanted is torch.OutOfMemoryError:
            STATS.oom += 1
        if dev_exc is None:
            raise Finding(f"{family}: {what}: neuron computed where {wanted.__name__} was expected"
                          + (f" (cpu: {common.first_line(cpu_exc)})" if cpu_exc else ""))
        if type(dev_exc) is not wanted:
            raise Finding(f"{family}: {what}: neuron raised {type(dev_exc).__name__}: {common.first_line(dev_exc)}; "
                          f"expected {wanted.__name__}" + (f" (cpu: {common.first_line(cpu_exc)})" if cpu_exc else ""))
        return
    if dev_exc is not None:
        raise Finding(f"{family}: {what}: neuron raised {type(dev_exc).__name__}: {common.first_line(dev_exc)}; "
                      f"cpu computed")
    STATS.both_computed += 1
    for t in common.tensors_in(dev_val):
        if t.device.type != "neuron":
            raise Finding(f"{family}: {what}: a result is on {t.device}, not neuron")
    # Both through the same tree map (which rebuilds a torch.Size as a tuple).
    _same_structure(_to_cpu(dev_val), _to_cpu(cpu_val), f"{family}: {what}", compare_values and not random)
