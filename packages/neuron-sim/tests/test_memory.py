"""Device memory, copies and memset through the public API, checked against numpy."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import neuron_sim as ns
from nsim_child import run_python, child_env

DTYPES = [np.float64, np.float32, np.float16, np.int8, np.uint8, np.int32, np.int64, np.bool_, np.complex64]
SIZES = [1, 7, 512, 4097, 1 << 18]


def _random(n, dtype, rng):
    if dtype == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    return rng.standard_normal(n).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_h2d_d2d_d2h(dtype):
    rng = np.random.default_rng(0)
    for n in SIZES:
        src = _random(n, dtype, rng).reshape(-1, 1) if n % 7 == 0 else _random(n, dtype, rng)
        a = ns.malloc(src.nbytes, device=0)
        b = ns.malloc(src.nbytes, device=1)
        try:
            assert ns.memcpy_htod(a, src) == src.nbytes
            ns.memcpy_dtod(b, a, src.nbytes)
            out = np.empty_like(src)
            assert ns.memcpy_dtoh(out, b) == src.nbytes
            np.testing.assert_array_equal(out, src)
        finally:
            ns.free(a)
            ns.free(b)


def test_partial_copies_at_offsets():
    src = np.arange(1000, dtype=np.int32)
    ptr = ns.malloc(src.nbytes)
    try:
        ns.memset(ptr, 0, src.nbytes)
        ns.memcpy_htod(ptr + 400, src[100:200])
        out = np.empty(1000, np.int32)
        ns.memcpy_dtoh(out, ptr)
        expected = np.zeros(1000, np.int32)
        expected[100:200] = src[100:200]
        np.testing.assert_array_equal(out, expected)
        tail = np.empty(10, np.int32)
        ns.memcpy_dtoh(tail, ptr + 4 * 190)
        np.testing.assert_array_equal(tail, expected[190:200])
    finally:
        ns.free(ptr)


def test_memset_fills_bytes():
    ptr = ns.malloc(1000)
    try:
        ns.memset(ptr, 0xAB, 1000)
        ns.memset(ptr + 100, 0x1FF, 50)  # only the low byte counts, as in C memset
        out = np.empty(1000, np.uint8)
        ns.memcpy_dtoh(out, ptr)
        expected = np.full(1000, 0xAB, np.uint8)
        expected[100:150] = 0xFF
        np.testing.assert_array_equal(out, expected)
    finally:
        ns.free(ptr)


def test_alignment_and_accounting():
    free0, total = ns.mem_get_info(2)
    before = ns.counters(2)
    ptrs = [ns.malloc(n, device=2) for n in (1, 100, 513, 4096)]
    try:
        assert all(p % ns.ALIGNMENT == 0 for p in ptrs)
        assert len(set(ptrs)) == 4
        after = ns.counters(2)
        assert after["live_allocations"] - before["live_allocations"] == 4
        assert after["total_allocations"] - before["total_allocations"] == 4
        assert after["bytes_in_use"] - before["bytes_in_use"] >= 1 + 100 + 513 + 4096
        assert ns.mem_get_info(2)[0] == total - after["bytes_in_use"]
        assert ns.mem_get_info(2)[0] < free0
    finally:
        for p in ptrs:
            ns.free(p)
    assert ns.counters(2)["live_allocations"] == before["live_allocations"]
    assert ns.mem_get_info(2) == (free0, total)


def test_copy_counters_count_bytes():
    before = ns.counters(3)
    ptr = ns.malloc(4096, device=3)
    try:
        ns.memcpy_htod(ptr, np.zeros(1024, np.float32))
        ns.memcpy_dtoh(np.empty(100, np.uint8), ptr)
        ns.memset(ptr, 1, 64)
    finally:
        ns.free(ptr)
    after = ns.counters(3)
    assert after["memcpy_h2d"] - before["memcpy_h2d"] == 1
    assert after["bytes_h2d"] - before["bytes_h2d"] == 4096
    assert after["memcpy_d2h"] - before["memcpy_d2h"] == 1
    assert after["bytes_d2h"] - before["bytes_d2h"] == 100
    assert after["memsets"] - before["memsets"] == 1
    assert after["peak_bytes_in_use"] >= 4096


def test_out_of_memory_names_sizes_then_recovers():
    _, total = ns.mem_get_info(1)
    big = ns.malloc(total // 2 + (1 << 20), device=1)  # untouched pages cost no host memory
    try:
        request = total // 2
        with pytest.raises(ns.OutOfMemoryError) as info:
            ns.malloc(request, device=1)
        msg = info.value.message
        assert info.value.code == ns.ErrorCode.OUT_OF_MEMORY
        assert str(request) in msg and str(total) in msg and str(total // 2 + (1 << 20)) in msg
        assert "device 1" in msg or "device=1" in msg
        assert "NEURON_SIM_HBM_CAPACITY" in msg
        assert ns.counters(1)["failed_allocations"] >= 1
    finally:
        ns.free(big)
    again = ns.malloc(request, device=1)
    ns.free(again)


def test_out_of_memory_with_small_capacity_in_child():
    proc = run_python("""
        import numpy as np, neuron_sim as ns
        a = ns.malloc(600 << 10)
        try:
            ns.malloc(600 << 10)
        except ns.OutOfMemoryError as exc:
            print("OOM", exc.message)
        ns.free(a)
        b = ns.malloc(1 << 20)
        ns.memcpy_htod(b, np.ones(1 << 18, np.float32))
        out = np.empty(1 << 18, np.float32); ns.memcpy_dtoh(out, b)
        print("OK", out.sum())
    """, child_env(NEURON_SIM_HBM_CAPACITY="1M"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("OOM") and str(600 << 10) in lines[0] and str(1 << 20) in lines[0]
    assert lines[1] == f"OK {float(1 << 18)}"


def test_bad_allocation_arguments():
    with pytest.raises(ns.InvalidValueError):
        ns.malloc(0)
    with pytest.raises(ns.InvalidDeviceError) as info:
        ns.malloc(16, device=9)
    assert "9" in info.value.message


def test_double_free_and_foreign_pointers():
    ptr = ns.malloc(64)
    ns.free(ptr)
    with pytest.raises(ns.InvalidPointerError) as info:
        ns.free(ptr)
    assert hex(ptr) in info.value.message.lower()
    host = np.zeros(16)
    with pytest.raises(ns.InvalidPointerError):
        ns.free(host.ctypes.data)
    inner = ns.malloc(1024)
    try:
        with pytest.raises(ns.InvalidPointerError):
            ns.free(inner + 512)  # not the start of the allocation
    finally:
        ns.free(inner)
    ns.free(0)  # NULL is accepted, as in C


def test_copy_bounds_and_kinds_are_checked():
    ptr = ns.malloc(100)
    try:
        with pytest.raises(ns.InvalidCopyError) as info:
            ns.memcpy_htod(ptr, np.zeros(101, np.uint8))
        assert "101" in info.value.message and "100" in info.value.message
        with pytest.raises(ns.InvalidCopyError):
            ns.memcpy_dtoh(np.empty(64, np.uint8), ptr + 64)
        with pytest.raises(ns.InvalidCopyError):
            ns.memcpy_dtod(ptr, ptr + 50, 60)
        with pytest.raises(ns.InvalidValueError, match="size=100"):  # a memset is not a copy
            ns.memset(ptr + 90, 0, 20)
        host = np.zeros(100, np.uint8)
        with pytest.raises(ns.InvalidCopyError):  # kind says device-to-device, source is host
            ns.memcpy(ptr, host.ctypes.data, 100, ns.MemcpyKind.DEVICE_TO_DEVICE)
    finally:
        ns.free(ptr)
    with pytest.raises(ns.InvalidCopyError):  # freed memory is no longer a copy target
        ns.memcpy_htod(ptr, np.zeros(4, np.uint8))


def test_host_buffers_must_be_contiguous_and_writable():
    ptr = ns.malloc(1024)
    try:
        strided = np.zeros((16, 16), np.float32)[:, ::2]
        with pytest.raises(ns.InvalidValueError, match="ascontiguousarray"):
            ns.memcpy_htod(ptr, strided)
        readonly = np.zeros(16, np.float32)
        readonly.setflags(write=False)
        with pytest.raises(ns.InvalidValueError, match="writable"):
            ns.memcpy_dtoh(readonly, ptr)
        with pytest.raises(ns.InvalidValueError, match="writable"):
            ns.memcpy_dtoh(b"0123", ptr)
        ns.memcpy_htod(ptr, b"abcd")  # any contiguous buffer is a valid source
        out = bytearray(4)
        ns.memcpy_dtoh(out, ptr)
        assert out == b"abcd"
    finally:
        ns.free(ptr)


def test_pointer_attributes():
    ptr = ns.malloc(3000, device=1)
    attrs = ns.pointer_attributes(ptr + 100)
    assert attrs == ns.PointerAttributes(ns.MemoryType.DEVICE, 1, ptr, 3000)
    ns.free(ptr)
    assert ns.pointer_attributes(ptr).type == ns.MemoryType.DEVICE_UNALLOCATED
    host = np.zeros(4)
    assert ns.pointer_attributes(host.ctypes.data).type == ns.MemoryType.UNREGISTERED
    pinned = ns.malloc_host(256)
    try:
        assert ns.pointer_attributes(pinned).type == ns.MemoryType.HOST
    finally:
        ns.free_host(pinned)


def test_alias_array_views_device_bytes():
    src = np.arange(64, dtype=np.float32).reshape(8, 8)
    ptr = ns.malloc(src.nbytes)
    try:
        ns.memcpy_htod(ptr, src)
        view = ns.alias_array(ptr, (8, 8), np.float32)
        np.testing.assert_array_equal(view, src)
        assert view.ctypes.data != ptr  # the private alias, not the device address
        assert ns.host_alias(ptr, 4) == view.ctypes.data
        view[0, 0] = -1.0
        out = np.empty_like(src)
        ns.memcpy_dtoh(out, ptr)
        assert out[0, 0] == -1.0
        with pytest.raises(ns.NeuronSimError):
            ns.host_alias(ptr, src.nbytes + 1)
    finally:
        ns.free(ptr)


def test_pinned_host_memory():
    before = ns.host_counters()
    raw = ns.malloc_host(4096)
    assert ns.host_counters()["live_allocations"] == before["live_allocations"] + 1
    ns.free_host(raw)
    with pytest.raises(ns.InvalidPointerError):
        ns.free_host(raw)

    arr = ns.empty_pinned((32, 8), np.float64)
    assert arr.shape == (32, 8) and arr.dtype == np.float64
    assert ns.pointer_attributes(arr.ctypes.data).type == ns.MemoryType.HOST
    arr[:] = np.arange(256).reshape(32, 8)
    ptr = ns.malloc(arr.nbytes)
    try:
        ns.memcpy_htod(ptr, arr)
        back = ns.empty_pinned(256, np.float64)
        ns.memcpy_dtoh(back, ptr)
        np.testing.assert_array_equal(back, np.arange(256))
    finally:
        ns.free(ptr)
    live = ns.host_counters()["live_allocations"]
    del arr, back
    gc.collect()
    assert ns.host_counters()["live_allocations"] == live - 2


def test_device_buffer_owns_its_allocation():
    src = np.linspace(0, 1, 1000)
    live = ns.counters(0)["live_allocations"]
    with ns.DeviceBuffer.from_array(src) as buf:
        assert ns.counters(0)["live_allocations"] == live + 1
        np.testing.assert_array_equal(buf.to_numpy(np.float64), src)
        assert int(buf) == buf.ptr
    assert ns.counters(0)["live_allocations"] == live
    with pytest.raises(ns.InvalidPointerError, match="freed"):
        buf.to_numpy()
    tmp = ns.DeviceBuffer(64)
    del tmp
    gc.collect()
    assert ns.counters(0)["live_allocations"] == live


def test_raw_memcpy_infers_the_kind_from_pointers():
    src = ns.empty_pinned(256, np.int16)
    src[:] = np.arange(256, dtype=np.int16) * 3
    dst = ns.empty_pinned(256, np.int16)
    ptr = ns.malloc(src.nbytes, device=3)
    try:
        before = ns.counters(3)
        ns.memcpy(ptr, src.ctypes.data, src.nbytes)  # MemcpyKind.DEFAULT: pinned host -> device
        ns.memcpy(dst.ctypes.data, ptr, src.nbytes, ns.MemcpyKind.DEVICE_TO_HOST)
        np.testing.assert_array_equal(dst, src)
        after = ns.counters(3)
        assert (after["memcpy_h2d"] - before["memcpy_h2d"], after["memcpy_d2h"] - before["memcpy_d2h"]) == (1, 1)
    finally:
        ns.free(ptr)
