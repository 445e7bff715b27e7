"""A host access to device memory ends the process with SIGSEGV and names what it touched."""

from __future__ import annotations

import re
import signal

from nsim_child import run_python


def test_host_read_of_allocation_names_base_size_device():
    proc = run_python("""
        import ctypes, sys, neuron_sim as ns
        ptr = ns.malloc(10000, device=1)
        print(hex(ptr), flush=True)
        ctypes.string_at(ptr + 16, 4)
        print("survived", flush=True)
    """, expect_crash=True)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr)
    base = proc.stdout.split()[0]
    assert "survived" not in proc.stdout
    assert re.search(rf"at {hex(int(base, 16) + 16)}\b", proc.stderr), proc.stderr
    assert re.search(r"device 1\b", proc.stderr)
    assert re.search(rf"base={base}\b", proc.stderr)
    assert re.search(r"size=10000\b", proc.stderr)


def test_host_write_to_unallocated_device_address():
    proc = run_python("""
        import ctypes, neuron_sim as ns
        ptr = ns.malloc(4096, device=0)
        ns.free(ptr)
        print(hex(ptr), flush=True)
        ctypes.memset(ptr, 0, 8)
    """, expect_crash=True)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr)
    assert f"at {proc.stdout.split()[0]}" in proc.stderr
    assert "not inside any live allocation" in proc.stderr


def test_ordinary_segfault_is_not_blamed_on_the_device():
    proc = run_python("""
        import ctypes, neuron_sim as ns
        ns.init()
        ctypes.string_at(16, 4)
    """, expect_crash=True)
    assert proc.returncode == -signal.SIGSEGV
    assert "neuron_sim" not in proc.stderr
