# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The rules of host execution (csrc/aten/HostScope.h) as a user sees them: a kernel that
computes on the host works on the device memory itself (alias), maps what it returns back
onto that memory (result), and writes back resizing and re-pointing of its arguments
(sync_mutated), each checked against the same code on CPU."""

import pytest
import torch

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)


def _allocated() -> int:
    return torch.neuron.memory_stats()["allocated_bytes.all.current"]


def _base():
    return torch.arange(12, dtype=torch.float32).reshape(3, 4)


# ---------------------------------------------------------------- alias


def test_in_place_fallback_on_a_view_writes_the_device_memory():
    # alias: the host kernel sees the view's own bytes (offset and strides), not a copy.
    cpu = _base()
    dev = cpu.to(DEV)
    cpu[:, 1::2].exp_()
    dev[:, 1::2].exp_()
    torch.testing.assert_close(dev.cpu(), cpu)


def test_conjugate_and_negative_views_keep_their_bits_on_the_host():
    cpu = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    dev = cpu.to(DEV)
    torch.testing.assert_close(torch.exp(dev.conj()).cpu(), torch.exp(cpu.conj()))
    torch.testing.assert_close(torch.exp(dev.conj().imag.neg()).cpu(), torch.exp(cpu.conj().imag.neg()))


# ---------------------------------------------------------------- result


def test_in_place_fallback_returns_the_argument_itself():
    dev = _base().to(DEV)
    ptr = dev.data_ptr()
    out = dev.abs_()
    assert out is dev
    assert out.data_ptr() == ptr


def test_view_result_of_a_fallback_is_a_view_of_the_device_storage():
    cpu = _base()
    dev = cpu.to(DEV)
    d = torch.diagonal(dev, offset=1)
    assert d.device == DEV
    assert d.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    assert (d.stride(), d.storage_offset()) == (torch.diagonal(cpu, offset=1).stride(),
                                                torch.diagonal(cpu, offset=1).storage_offset())
    d.fill_(-1.0)
    torch.diagonal(cpu, offset=1).fill_(-1.0)
    torch.testing.assert_close(dev.cpu(), cpu)


def test_fresh_result_adopts_device_memory():
    dev = torch.randn(256, 256, device=DEV)
    before = _allocated()
    out = torch.exp(dev)
    assert out.device == DEV
    assert _allocated() - before >= out.numel() * out.element_size()
    torch.testing.assert_close(out.cpu(), torch.exp(dev.cpu()))
    del out
    assert _allocated() == before


# ---------------------------------------------------------------- sync_mutated


def test_out_tensor_resized_by_the_host_kernel_is_resized_on_the_device():
    x = torch.randn(5, 7)
    out_cpu = torch.empty(0)
    out_dev = torch.empty(0, device=DEV)
    torch.cumsum(x, 1, out=out_cpu)
    torch.cumsum(x.to(DEV), 1, out=out_dev)
    assert out_dev.device == DEV
    assert out_dev.shape == out_cpu.shape
    assert out_dev.untyped_storage().nbytes() >= out_cpu.numel() * out_cpu.element_size()
    torch.testing.assert_close(out_dev.cpu(), out_cpu)


def test_hand_written_kernel_writes_back_out_resizing():
    # histc is a hand-written host kernel (HostKernels.cpp) that resizes its out= tensor.
    x = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6], dtype=torch.int64)
    out = torch.empty(0, dtype=torch.int64, device=DEV)
    torch.histc(x.to(DEV), bins=4, min=0, max=10, out=out)
    assert out.shape == (4,)
    torch.testing.assert_close(out.cpu(), torch.histc(x.double(), bins=4, min=0, max=10).long())


def test_resize_in_place_fallback_keeps_old_values_and_grows_device_storage():
    cpu = torch.arange(6, dtype=torch.float32)
    dev = cpu.to(DEV)
    cpu.resize_(4, 4)
    dev.resize_(4, 4)
    assert dev.shape == cpu.shape
    assert dev.untyped_storage().nbytes() >= 16 * 4
    torch.testing.assert_close(dev.reshape(-1)[:6].cpu(), torch.arange(6, dtype=torch.float32))
