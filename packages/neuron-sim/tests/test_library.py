"""Native interop: headers and the one shared runtime instance."""

from __future__ import annotations

import ctypes
import os
import re

import neuron_sim as ns


class _Attributes(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("base", ctypes.c_void_p), ("size", ctypes.c_size_t)]


def test_include_and_library_paths():
    assert os.path.isfile(os.path.join(ns.get_include(), "neuron_sim", "neuron_sim.h"))
    path = ns.get_library_path()
    assert os.path.isfile(path) and os.path.basename(path).startswith("libneuron_sim")
    assert os.path.dirname(path) == ns.get_library_dir()
    assert os.path.isfile(os.path.join(ns.get_library_dir(), "libneuron_sim.so"))


def test_ctypes_reaches_the_same_runtime_instance():
    lib = ctypes.CDLL(ns.get_library_path())
    ptr = ns.malloc(777, device=2)
    try:
        attrs = _Attributes()
        assert lib.nsimPointerGetAttributes(ctypes.c_void_p(ptr), ctypes.byref(attrs)) == 0
        assert (attrs.type, attrs.device, attrs.base, attrs.size) == (int(ns.MemoryType.DEVICE), 2, ptr, 777)
        count = ctypes.c_int()
        assert lib.nsimGetDeviceCount(ctypes.byref(count)) == 0
        assert count.value == ns.device_count()
    finally:
        ns.free(ptr)
    # A pointer freed through the C API is gone for the bindings too.
    other = ns.malloc(64)
    assert lib.nsimFree(ctypes.c_void_p(other)) == 0
    assert ns.pointer_attributes(other).type == ns.MemoryType.DEVICE_UNALLOCATED


def test_api_version_matches_header():
    header = open(os.path.join(ns.get_include(), "neuron_sim", "neuron_sim.h")).read()
    assert f"#define NSIM_API_VERSION {ns.API_VERSION}" in header
    assert f"#define NSIM_ALIGNMENT {ns.ALIGNMENT}" in header


def _header_enum(prefix: str) -> dict[str, int]:
    header = open(os.path.join(ns.get_include(), "neuron_sim", "neuron_sim.h")).read()
    return {name: int(value) for name, value in re.findall(rf"\bNSIM_{prefix}_(\w+) = (\d+)", header)}


def test_enums_mirror_the_header():
    assert _header_enum("ERROR") == {c.name: c.value for c in ns.ErrorCode if c.name != "SUCCESS"}
    assert _header_enum("MEMCPY") == {c.name: c.value for c in ns.MemcpyKind}
    assert _header_enum("LAUNCH") == {c.name: c.value for c in ns.LaunchKind}
    assert _header_enum("MEMORY") == {c.name: c.value for c in ns.MemoryType}
    for code in ns.ErrorCode:
        if code != ns.ErrorCode.SUCCESS:
            assert ns._C.error_name(code) == f"NSIM_ERROR_{code.name}"
