# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The native decision's signature cache (csrc/aten/NativeDecision.h): a call signature
(op, dtype, operand shapes, argument dtypes, attribute classes) is decided by the kernel
table's estimator once; a call that differs in any of them is decided again."""

import pytest
import torch
import torch_neuron
from torch_neuron import _C
from torch_neuron.native import estimate as _estimate_mod

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)


@pytest.fixture
def decisions():
    """Records each estimator call for aten::add.Tensor; installing an estimator empties the cache."""
    calls = []

    def counting(op, entry, dtype, args):
        if op == "aten::add.Tensor":
            calls.append(args)
        return _estimate_mod.estimate(op, entry, dtype, args)

    _C.set_native_estimator(counting)
    try:
        yield calls
    finally:
        _C.set_native_estimator(_estimate_mod.estimate)


def _adds(a, b, **kw):
    torch_neuron.clear_op_tracking()
    out = torch.add(a, b, **kw)
    return out, torch_neuron.get_executed_ops()["aten::add.Tensor"]


def test_same_signature_is_decided_once(decisions):
    a, b = torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV)
    out, first = _adds(a, b)
    assert len(decisions) == 1
    assert first == {"native": 1, "fallback": 0}
    for _ in range(3):
        out, again = _adds(torch.randn(64, 64, device=DEV), b)
        assert again == first
    assert len(decisions) == 1
    torch.testing.assert_close(out.cpu(), torch.add(out.cpu() - b.cpu(), b.cpu()))


def test_a_different_attribute_is_decided_again(decisions):
    a, b = torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV)
    _adds(a, b)
    assert len(decisions) == 1
    out, _ = _adds(a, b, alpha=2.0)
    assert len(decisions) == 2
    torch.testing.assert_close(out.cpu(), torch.add(a.cpu(), b.cpu(), alpha=2.0))
    # Numbers enter the signature only as 0, 1 or other: alpha=3 is alpha=2's signature.
    _adds(a, b, alpha=3.0)
    assert len(decisions) == 2
    _adds(a, b, alpha=0.0)
    assert len(decisions) == 3


def test_a_different_shape_or_dtype_is_decided_again(decisions):
    _adds(torch.randn(64, 64, device=DEV), torch.randn(64, 64, device=DEV))
    _adds(torch.randn(32, 64, device=DEV), torch.randn(32, 64, device=DEV))
    assert len(decisions) == 2
    _adds(torch.randn(32, 64, device=DEV), torch.randn(64, device=DEV))
    assert len(decisions) == 3
    _adds(torch.randn(32, 64, device=DEV, dtype=torch.bfloat16),
          torch.randn(32, 64, device=DEV, dtype=torch.bfloat16))
    assert len(decisions) == 4


def test_a_rejected_signature_stays_rejected_without_a_new_decision(decisions):
    # alpha != 1 is outside add's kernel coverage or not; whichever it is, the cached
    # decision repeats: the same native/fallback split on every call of the signature.
    a, b = torch.randn(16, 16, device=DEV), torch.randn(16, 16, device=DEV)
    _, first = _adds(a, b, alpha=2.0)
    _, second = _adds(a, b, alpha=2.0)
    assert first == second
    assert len(decisions) == 1
