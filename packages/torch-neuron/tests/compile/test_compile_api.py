# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Registration, options, inference, dynamic shapes, reports, the kernel cache and plain
torch.compile(model) for backend "neuron"."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
import torch_neuron
from compile_helpers import DEV
from torch import nn

pytestmark = pytest.mark.timeout(180)


def _run(code: str, env=None, timeout=150) -> subprocess.CompletedProcess:
    """A fresh interpreter (spawned, not forked: the parent owns the device)."""
    full_env = {**os.environ, "TORCH_NEURON_FALLBACK_WARN": "0", **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def test_unknown_option_lists_the_valid_ones():
    f = torch.compile(lambda x: x + 1, backend="neuron", options={"fusoin": True})
    with pytest.raises(Exception, match=r"unknown option\(s\) \['fusoin'\]; valid options: fusion, partitioner"):
        f(torch.randn(4, device=DEV))


@pytest.mark.parametrize("mode", ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_modes_are_accepted(mode):
    x = torch.randn(32, 8, device=DEV)
    f = torch.compile(lambda t: F.softmax(t * 2, dim=-1), backend="neuron", mode=mode)
    torch.testing.assert_close(f(x).cpu(), F.softmax(x.cpu() * 2, dim=-1))


def test_options_object_is_frozen_and_hashable():
    from torch_neuron.compile import CompileOptions
    a, b = CompileOptions(), CompileOptions(partitioner="default")
    assert hash(a) == hash(CompileOptions()) and a.key() != b.key()
    with pytest.raises(Exception):
        a.fusion = False
    with pytest.raises(ValueError, match="valid: 'min_cut', 'default'"):
        CompileOptions(partitioner="greedy")


def test_softmax_chain_is_one_kernel_with_fewer_launches_and_bytes():
    """A softmax over a scaled, shifted input: eager launches one kernel per op, the compiled
    graph one generated kernel whose schedule moves less HBM than the ops separately."""
    import neuron_sim

    def f(x, b):
        return F.softmax((x + b) * 0.5, dim=-1)
    x, b = torch.randn(256, 96, device=DEV), torch.randn(96, device=DEV)
    cf = torch.compile(f, backend="neuron")
    cf(x, b)

    def launches(fn):
        torch.neuron.synchronize()
        n0, t0 = neuron_sim.counters(0)["launches"], torch_neuron.device_time_ns()
        out = fn(x, b)
        torch.neuron.synchronize()
        return out, neuron_sim.counters(0)["launches"] - n0, torch_neuron.device_time_ns() - t0
    ref, n_eager, t_eager = launches(f)
    out, n_comp, t_comp = launches(cf)
    torch.testing.assert_close(out.cpu(), ref.cpu())
    assert n_comp < n_eager and t_comp < t_eager
    (k,) = torch_neuron.compile_stats()["fused_kernels"]
    assert k["ops"].split(" > ") == ["add", "multiply", "max", "subtract", "exp", "sum", "divide"]
    assert k["hbm_bytes"] < k["eager_hbm_bytes"]


def test_device_numerics_run_the_generated_kernel():
    """With device numerics on, the fused program computes the values (a bf16 chain included)."""
    def f(x, w):
        h = torch.tanh(x * w + 1.0)
        return h - h.amax(dim=-1, keepdim=True)
    x, w = torch.randn(200, 64), torch.randn(64)
    torch_neuron.set_device_numerics(True)
    try:
        for dtype in (torch.float32, torch.bfloat16):
            out = torch.compile(f, backend="neuron")(x.to(DEV, dtype), w.to(DEV, dtype))
            ref = f(x.double(), w.double())
            tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
            torch.testing.assert_close(out.cpu().double(), ref, **tol)
    finally:
        torch_neuron.set_device_numerics(False)
    assert torch_neuron.compile_stats()["numerics_launches"] >= 2


def test_inference_mode_compile():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(DEV)
    x = torch.randn(64, 16, device=DEV)
    ref = m(x)
    ref = F.softmax(ref, dim=-1)
    cm = torch.compile(lambda t: F.softmax(m(t), dim=-1), backend="neuron")
    with torch.inference_mode():
        out = cm(x)
    torch.testing.assert_close(out.cpu(), ref.detach().cpu())
    assert any(k["graph"].endswith("inference") for k in torch_neuron.compile_stats()["fused_kernels"])


def test_dynamic_shape_recompiles_per_shape():
    counter = torch._dynamo.testing.CompileCounterWithBackend("neuron")
    f = torch.compile(lambda x: F.log_softmax(x * 3, dim=-1), backend=counter)
    for n in (8, 24, 40):
        x = torch.randn(n, 32, device=DEV)
        torch.testing.assert_close(f(x).cpu(), F.log_softmax(x.cpu() * 3, dim=-1))
    assert counter.frame_count == 2          # Dynamo: static, then one symbolic graph
    s = torch_neuron.compile_stats()
    assert s["specializations"] == 3          # the backend: one lowering per concrete shape


def test_found_with_only_import_torch_and_torch_logs_report_breaks_and_recompiles():
    """One fresh interpreter: the entry point makes "neuron" a backend after ``import torch``
    alone, and TORCH_LOGS shows Dynamo's graph-break and recompile reports for it."""
    r = _run("""
        import torch
        from torch._dynamo import list_backends
        assert "neuron" in list_backends(exclude_tags=()), list_backends(exclude_tags=())
        def f(x):
            y = torch.exp(x) + 1
            print("host side effect")      # a graph break
            return y * 2
        g = torch.compile(f, backend="neuron")
        for n in (4, 6):
            x = torch.randn(n, 8, device="neuron")
            torch.testing.assert_close(g(x).cpu(), (torch.exp(x.cpu()) + 1) * 2)
        import torch_neuron
        print("GRAPHS", torch_neuron.compile_stats()["graphs"])
    """, env={"TORCH_LOGS": "graph_breaks,recompiles"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Graph break in user code" in r.stderr and "print" in r.stderr
    assert "Recompiling function" in r.stderr and "size mismatch" in r.stderr
    assert int(r.stdout.split("GRAPHS")[1]) >= 2


def _softmax_of_tanh(x):
    return F.softmax(torch.tanh(x) * 4, dim=-1)


def test_second_process_hits_the_kernel_cache(tmp_path, monkeypatch):
    """This process generates the kernels; a second one compiling the same function reads them."""
    monkeypatch.setenv("TORCH_NEURON_COMPILE_CACHE_DIR", str(tmp_path / "cache"))
    torch.compile(_softmax_of_tanh, backend="neuron")(torch.randn(64, 48, device=DEV))
    first = torch_neuron.compile_stats()["cache"]
    r = _run("""
        import json, torch, torch_neuron, torch.nn.functional as F
        def _softmax_of_tanh(x):
            return F.softmax(torch.tanh(x) * 4, dim=-1)
        torch.compile(_softmax_of_tanh, backend="neuron")(torch.randn(64, 48, device="neuron"))
        print("STATS" + json.dumps(torch_neuron.compile_stats()["cache"]))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    second = json.loads(r.stdout.split("STATS")[1])
    assert first["hits"] == 0 and first["misses"] >= 1
    assert second["hits"] == first["misses"] and second["misses"] == 0


def test_cache_key_follows_the_generator_and_simulator_sources(tmp_path, monkeypatch):
    """Entries hold latencies the ISA simulator computed for the generator's output, so editing
    either package's source must change every key."""
    import shutil
    import sys
    from torch_neuron.compile import cache

    k = cache.key("opts", "trn2", ("chain",))
    assert k == cache.key("opts", "trn2", ("chain",))
    assert k != cache.key("opts", "trn1", ("chain",))
    import neuron_sim.isa
    copy = tmp_path / "neuron_sim"
    shutil.copytree(pathlib.Path(neuron_sim.__file__).parent, copy)
    with open(copy / "isa" / "timing.py", "a") as f:
        f.write("\n# edited\n")
    monkeypatch.setattr(sys.modules["neuron_sim.isa"], "__path__", [str(copy / "isa")])
    monkeypatch.setattr(sys.modules["neuron_sim.isa"], "__spec__", importlib.util.spec_from_file_location(
        "neuron_sim.isa", copy / "isa" / "__init__.py", submodule_search_locations=[str(copy / "isa")]))
    cache.producers_digest.cache_clear()
    try:
        assert cache.key("opts", "trn2", ("chain",)) != k
    finally:
        monkeypatch.undo()
        cache.producers_digest.cache_clear()
    assert cache.key("opts", "trn2", ("chain",)) == k


def test_plain_torch_compile_routes_neuron_graphs():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 4)).to(DEV)
    x = torch.randn(32, 8, device=DEV)
    out = torch.compile(m)(x)
    torch.testing.assert_close(out.cpu(), m(x).detach().cpu())
    s = torch_neuron.compile_stats()
    assert s["graphs"] == 1 and s["fused_launches"] >= 1


def test_nki_op_and_sdpa_inside_a_compiled_graph():
    """An nki_op kernel and scaled_dot_product_attention are single nodes of the compiled graph,
    around fused chains; values and gradients match eager."""
    import neuron_kernels.language as nl
    from torch_neuron import nki_op

    @nl.jit
    def double_kernel(a: torch.Tensor) -> torch.Tensor:
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for r in range(0, a.shape[0], 128):
            nl.store(out[r:r + 128], nl.multiply(nl.load(a[r:r + 128]), 2.0))
        return out

    double = nki_op("test_compile::double")(double_kernel)
    double.register_autograd(lambda ctx, g: double(g))

    def f(q, k, v):
        y = F.scaled_dot_product_attention(torch.tanh(q) * 0.5, k, v, is_causal=True)
        y = y.reshape(-1, y.shape[-1])
        return F.softmax(double(y) + 1.0, dim=-1).sum()

    g = torch.Generator().manual_seed(0)
    qkv = [torch.randn(2, 2, 16, 8, generator=g) for _ in range(3)]
    eager = [t.to(DEV).requires_grad_() for t in qkv]
    comp = [t.to(DEV).requires_grad_() for t in qkv]
    f(*eager).backward()
    out = torch.compile(f, backend="neuron")(*comp)
    out.backward()
    torch.testing.assert_close(out.detach().cpu(), f(*eager).detach().cpu())
    for a, b in zip(comp, eager):
        torch.testing.assert_close(a.grad.cpu(), b.grad.cpu(), rtol=1e-4, atol=1e-5)
    s = torch_neuron.compile_stats()
    assert "test_compile::double" not in s["fallback_reasons"] and s["kernel_nodes"] >= 2
    assert not any("scaled_dot_product" in op for op in s["fallback_reasons"]), s["fallback_reasons"]


def test_host_aliases_share_the_device_bytes():
    """The fused chains' host reference writes through CPU aliases of device tensors: views keep
    their strides and offset, conj bits carry over, writes land in device memory."""
    from torch_neuron import _C
    t = torch.randn(64, 128, device=DEV)
    v = t[:, 3:70:2]
    c = torch.randn(3, 4, dtype=torch.complex64, device=DEV).conj()
    cpu = torch.ones(2)
    a, av, ac, same = _C.host_aliases([t, v, c, cpu])
    assert a.device.type == av.device.type == "cpu" and same is cpu
    assert av.stride() == v.stride() and av.storage_offset() == v.storage_offset()
    torch.testing.assert_close(av, v.cpu())
    torch.testing.assert_close(ac.resolve_conj(), c.cpu().resolve_conj())
    av.fill_(7.0)
    assert (t.cpu()[:, 3:70:2] == 7.0).all() and (t.cpu()[:, 0] != 7.0).all()
    (e,) = _C.host_aliases([torch.empty(0, device=DEV)])
    assert e.numel() == 0
