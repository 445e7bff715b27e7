# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A compiled graph runs as one launch (one NEFF): its kernels scheduled back to back on the
engines, one launch overhead, the kernels still counted as native executions."""
from __future__ import annotations

import copy
import time

import neuron_sim
import pytest
import torch
import torch_neuron
from compile_helpers import DEV
from neuron_sim.device import profile_properties
from torch import nn

pytestmark = pytest.mark.timeout(300)


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(96, 384), nn.GELU(approximate="tanh"), nn.Linear(384, 96),
                         nn.LayerNorm(96)).to(DEV)


def _run(fn, x):
    """(output, device ns, launches) of one call."""
    torch.neuron.synchronize()
    t0, l0 = torch_neuron.device_time_ns(DEV), neuron_sim.counters(DEV.index)["launches"]
    out = fn(x)
    torch.neuron.synchronize()
    return out, torch_neuron.device_time_ns(DEV) - t0, neuron_sim.counters(DEV.index)["launches"] - l0


def _profile() -> str:
    from torch_neuron.native.bridge import device_profile
    return device_profile(DEV)


@torch.no_grad()
def test_a_graph_is_one_launch_shorter_than_its_kernels_one_by_one():
    m = _mlp()
    x = torch.randn(512, 96, device=DEV)
    per_op = torch.compile(m, backend="neuron", options={"graph_launch": False})
    graph = torch.compile(m, backend="neuron")
    torch_neuron.clear_compile_stats()
    for _ in range(2):
        ref, ns_ops, n_ops = _run(per_op, x)
        out, ns_graph, n_graph = _run(graph, x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(out.cpu(), m.cpu()(x.cpu()), rtol=1e-4, atol=1e-5)
    assert n_ops > 1 and n_graph == 1
    launches = torch_neuron.compile_stats()["graph_launches"]
    assert len(launches) == 1
    (info,) = launches.values()
    overhead = profile_properties(_profile()).launch_overhead_ns
    # The launch is the graph schedule plus one launch overhead ...
    assert ns_graph == pytest.approx(info["latency_ns"] + overhead, abs=2)
    # ... shorter than the same kernels launched one after another (their overheads, and the
    # loads of weights that overlap earlier kernels), yet no shorter than the longest of them.
    assert ns_graph < ns_ops - (n_ops - 1) * overhead
    assert ns_graph > (ns_ops - n_ops * overhead) / n_ops


@torch.no_grad()
def test_the_graphs_kernels_still_count_as_native_executions():
    m = _mlp()
    x = torch.randn(256, 96, device=DEV)
    f = torch.compile(m, backend="neuron")
    f(x)
    before = torch_neuron.get_executed_ops()
    f(x)
    after = torch_neuron.get_executed_ops()
    ran = {op for op, n in after.items() if n["native"] > before.get(op, {"native": 0})["native"]}
    assert any(op.startswith("neuron::fused_") for op in ran), ran
    # The graph's launch stands for those executions; it is not an op execution of its own.
    assert not any(op.endswith("_inference") for op in ran), ran


def test_a_host_fallback_cuts_the_graph_into_two_launches():
    """On the chip the host computes between two NEFFs: the native kernels before the fallback
    are one launch, the fallback is placed as in eager, the kernels after it another launch."""
    torch.manual_seed(0)
    a, b = nn.Linear(64, 64).to(DEV), nn.Linear(64, 32).to(DEV)

    def f(x):
        h = torch.special.bessel_j0(torch.tanh(a(x)) * 2.0)
        return torch.relu(b(h)) + 1.0
    x = torch.randn(128, 64, device=DEV)
    g = torch.compile(f, backend="neuron", options={"fusion": False})
    torch_neuron.clear_compile_stats()
    with torch.no_grad():
        before = torch_neuron.get_fallback_ops().get("aten::special_bessel_j0", 0)
        g(x)
        out, _, n = _run(g, x)
        assert torch_neuron.get_fallback_ops().get("aten::special_bessel_j0", 0) == before + 2
    assert n == 3
    (info,) = torch_neuron.compile_stats()["graph_launches"].values()
    assert info["parts"] >= 4
    ref = torch.relu(nn.functional.linear(torch.special.bessel_j0(torch.tanh(
        nn.functional.linear(x.cpu(), a.weight.cpu(), a.bias.cpu())) * 2.0), b.weight.cpu(), b.bias.cpu())) + 1.0
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)


def test_training_steps_with_graph_launches_match_per_kernel_launches():
    """Values do not depend on how the timeline is built; the graph's step takes less device time."""
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    xs = [torch.randn(64, 32) for _ in range(3)]
    results = []
    for graph in (False, True):
        m = copy.deepcopy(base).to(DEV)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        f = torch.compile(lambda x: m(x).square().mean(), backend="neuron", options={"graph_launch": graph})
        losses, times = [], []
        for x in xs:
            torch.neuron.synchronize()
            t0 = torch_neuron.device_time_ns(DEV)
            loss = f(x.to(DEV))
            loss.backward()
            torch.neuron.synchronize()
            times.append(torch_neuron.device_time_ns(DEV) - t0)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        results.append((losses, times))
    (l_ops, t_ops), (l_graph, t_graph) = results
    assert l_graph == pytest.approx(l_ops, rel=1e-6)
    assert t_graph[-1] < t_ops[-1]


@torch.no_grad()
def test_the_graph_launch_carries_its_kernels_flops_and_engine_time():
    """MFU and the engine report read the timeline: the graph's record counts every matmul's flops,
    fused or not, and the busy time of each engine of its schedule."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(96, 384), nn.GELU(approximate="tanh"), nn.Linear(384, 96)).to(DEV)
    x = torch.randn(512, 96, device=DEV)
    want = 2 * 512 * 96 * 384 * 2                     # two matmuls
    for graph in (False, True):
        f = torch.compile(m, backend="neuron", options={"graph_launch": graph})
        f(x)
        torch.neuron.synchronize()
        t = time.time_ns()
        f(x)
        torch.neuron.synchronize()
        records = [r for r in neuron_sim.timeline(DEV.index) if r.host_ns >= t]
        assert sum(r.flops for r in records) == pytest.approx(want)
        if graph:
            (r,) = records
            assert r.name.endswith("_inference")
            assert r.engine_busy_ns[0] > 0 and r.engine_busy_ns[4] > 0       # TensorE and DMA
            assert max(r.engine_busy_ns) <= r.end_ns - r.start_ns


@torch.no_grad()
def test_intermediates_stay_in_sbuf_and_inputs_and_outputs_pass_through_hbm():
    """With sbuf_residency (default), what one kernel of the graph writes and a later one reads
    moves nothing; weights, inputs and the output still cross HBM."""
    m = _mlp()
    x = torch.randn(256, 96, device=DEV)
    ref = m.cpu()(x.cpu())
    m.to(DEV)
    info = {}
    for resident in (False, True):
        torch_neuron.clear_compile_stats()
        f = torch.compile(m, backend="neuron", options={"fusion": False, "sbuf_residency": resident})
        f(x)
        out, ns, n = _run(f, x)
        torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-5)
        (info[resident],) = torch_neuron.compile_stats()["graph_launches"].values()
        info[resident]["ns"] = ns
        assert n == 1
    off, on = info[False], info[True]
    assert off["resident_bytes"] == 0 and on["resident_bytes"] > 0
    # The same programs: every byte either moved or was served by SBUF.
    assert on["hbm_bytes"] + on["resident_bytes"] == off["hbm_bytes"]
    # The hidden activations (256 x 384 fp32, read by GELU and the second linear) are among the
    # resident bytes; the input, the weights and the output are not.
    io_bytes = 4 * (x.numel() + sum(p.numel() for p in m.parameters()) + out.numel())
    assert on["resident_bytes"] >= 2 * 4 * 256 * 384
    assert on["hbm_bytes"] >= io_bytes
    assert on["latency_ns"] < off["latency_ns"] and on["ns"] < off["ns"]
