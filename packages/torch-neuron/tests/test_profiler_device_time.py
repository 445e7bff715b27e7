# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""torch.profiler on device "neuron": device activity from the simulated timeline.

References: neuron_sim's timeline records (the simulated durations) and torch.neuron.Event
elapsed times; the profiler's figures must equal them.
"""
import json
import os
import subprocess
import sys
import textwrap

import neuron_sim
import pytest
import torch
import torch_neuron  # noqa: F401
from torch.profiler import ProfilerActivity, profile, record_function

DEV = "neuron"
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _records_between(before: int):
    torch.neuron.synchronize()
    return neuron_sim.timeline(0)[before:]


def _device_us(records, name):
    return sum(r.duration_ns for r in records if r.name == name) / 1e3


def _event(prof, key):
    return next(e for e in prof.key_averages() if e.key == key)


def test_an_ops_self_neuron_time_is_its_launches_simulated_time():
    a = torch.randn(256, 384, device=DEV)
    b = torch.randn(384, 128, device=DEV)
    c = torch.randn(64, 64, dtype=torch.float64, device=DEV)   # no float64 kernel: host round trip
    torch.neuron.synchronize()
    before = len(neuron_sim.timeline(0))
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(3):
            torch.mm(a, b)
        torch.mm(c, c)
        torch.relu(a)
    records = _records_between(before)
    models = {r.model for r in records if r.name == "aten::mm"}
    assert models == {neuron_sim.CostModel.KERNEL_SCHEDULE, neuron_sim.CostModel.HOST_ROUND_TRIP}
    mm = _event(prof, "aten::mm")
    assert mm.self_device_time_total == pytest.approx(_device_us(records, "aten::mm"), rel=1e-4)
    assert mm.device_time_total == pytest.approx(_device_us(records, "aten::mm"), rel=1e-4)
    relu = _event(prof, "aten::relu")
    assert relu.device_time_total == pytest.approx(_device_us(records, "aten::relu"), rel=1e-4)
    assert relu.device_time_total > 0
    table = prof.key_averages().table(sort_by="self_device_time_total")
    assert "Self NEURON" in table and "NEURON total" in table


def test_records_carry_cost_inputs_and_engine_busy_time():
    a = torch.randn(128, 256, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(256, 512, device=DEV, dtype=torch.bfloat16)
    torch.neuron.synchronize()
    before = len(neuron_sim.timeline(0))
    with profile(activities=ACTIVITIES):
        torch.mm(a, b)
        torch.mm(a.double(), b.double())
    records = [r for r in _records_between(before) if r.name == "aten::mm"]
    native, host = records
    assert native.model == neuron_sim.CostModel.KERNEL_SCHEDULE
    assert native.dtype_class == neuron_sim.DtypeClass.BF16
    assert native.engines["tensor"] > 0 and native.engines["dma"] > 0
    assert native.correlation_id > 0          # stamped while the profiler records
    assert host.dtype_class == neuron_sim.DtypeClass.FP32
    assert host.flops == 2.0 * 128 * 256 * 512
    assert host.bytes_read == (128 * 256 + 256 * 512) * 8
    assert host.bytes_written == 128 * 512 * 8
    p = neuron_sim.get_device_properties(0)
    want = neuron_sim.model_launch_duration(0, neuron_sim.CostModel.HOST_ROUND_TRIP, neuron_sim.DtypeClass.FP32,
                                            neuron_sim.ComputeClass.TENSOR, host.flops, host.bytes_read,
                                            host.bytes_written)
    assert host.duration_ns == pytest.approx(want)
    roofline = p.launch_overhead_ns + max(host.flops / p.peak_flops_fp32 * 1e9,
                                          (host.bytes_read + host.bytes_written) / p.hbm_bandwidth * 1e9)
    assert host.duration_ns > roofline     # the round trip over the host link is on top


def test_fp8_runs_at_the_fp8_peak_in_the_cost_model():
    p = neuron_sim.get_device_properties(0)
    flops = 1e12
    ns = {d: neuron_sim.model_launch_duration(0, neuron_sim.CostModel.ROOFLINE, d, neuron_sim.ComputeClass.TENSOR,
                                              flops, 1.0, 1.0)
          for d in (neuron_sim.DtypeClass.FP32, neuron_sim.DtypeClass.BF16, neuron_sim.DtypeClass.FP8)}
    assert ns[neuron_sim.DtypeClass.FP8] == pytest.approx(p.launch_overhead_ns + flops / p.peak_flops_fp8 * 1e9)
    assert ns[neuron_sim.DtypeClass.BF16] == pytest.approx(p.launch_overhead_ns + flops / p.peak_flops_bf16 * 1e9)
    assert ns[neuron_sim.DtypeClass.FP32] == pytest.approx(p.launch_overhead_ns + flops / p.peak_flops_fp32 * 1e9)


def _mlp_step(model, x, opt):
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


def _trace(tmp_path, prof):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return path, json.load(f)


def test_trace_device_time_equals_event_elapsed_time_with_lanes_and_forward_flows(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(32, 64, device=DEV)
    _mlp_step(model, x, opt)                          # warm: decisions cached, state allocated
    torch.neuron.synchronize()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with profile(activities=ACTIVITIES) as prof:
        start.record()
        with record_function("train_step"):
            _mlp_step(model, x, opt)
        end.record()
        torch.neuron.synchronize()
    path, trace = _trace(tmp_path, prof)
    events = trace["traceEvents"]
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert device, "no device activity in the trace"
    total_us = sum(e["dur"] for e in device)
    assert total_us == pytest.approx(start.elapsed_time(end) * 1e3, rel=1e-3)

    # Lanes: the device process names its queue lanes; kernel schedules add engine lanes.
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    lanes = {names.get((e["pid"], e["tid"])) for e in device}
    assert any(n and n.startswith("queue") for n in lanes), lanes
    assert "TensorE" in names.values()

    # Flows: every linked kernel has an arrow from a launch on the op's thread, pointing forward.
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert starts and set(starts) == set(ends)
    for fid, s in starts.items():
        assert ends[fid]["ts"] >= s["ts"]
    ops = {e["args"]["External id"]: e for e in events
           if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    linked = [e for e in device if e["args"].get("External id") in ops]
    assert len(linked) >= len(device) - 2
    for k in linked:
        assert k["ts"] >= ops[k["args"]["External id"]]["ts"]
    # Device order is the simulated order on each lane.
    for lane in {(e["pid"], e["tid"]) for e in device}:
        seq = [e for e in device if (e["pid"], e["tid"]) == lane]
        for a, b in zip(seq, seq[1:]):
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-3
    step = _event(prof, "train_step")
    assert step.device_time_total == pytest.approx(total_us, rel=1e-3)


def test_schedule_tensorboard_handler_and_memory(tmp_path):
    a = torch.randn(128, 128, device=DEV)
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    with profile(activities=ACTIVITIES, schedule=sched, on_trace_ready=handler, profile_memory=True) as prof:
        for _ in range(5):
            (a @ a).relu()
            prof.step()
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(files) == 1
    with open(tmp_path / files[0]) as f:
        trace = json.load(f)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["args"].get("op") == "aten::mm"]
    assert len(kernels) == 2                          # the two active steps only
    mem = [e for e in trace["traceEvents"] if e.get("name") == "[memory]"]
    assert any(e["args"].get("Device Type") == torch._C._autograd.DeviceType.PrivateUse1.value for e in mem) or \
        any(int(e["args"].get("Device Type", -1)) == 20 for e in mem), mem[:3]
    mm = _event(prof, "aten::mm")
    assert mm.device_memory_usage > 0


def test_hta_reads_the_trace_and_lists_neuron_kernels(tmp_path):
    hta = pytest.importorskip("hta.trace_analysis")
    a = torch.randn(256, 256, device=DEV)
    torch.neuron.synchronize()
    before = len(neuron_sim.timeline(0))
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(4):
            torch.relu(a @ a)
    records = _records_between(before)
    trace_dir = tmp_path / "hta"
    trace_dir.mkdir()
    prof.export_chrome_trace(str(trace_dir / "rank0.pt.trace.json"))
    analysis = hta.TraceAnalysis(trace_dir=str(trace_dir))
    _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    by_name = dict(zip(kernels["name"], kernels["sum (us)"]))
    for name in ("aten::mm", "aten::relu"):
        # HTA keeps whole microseconds of each kernel's start and duration: within 2 us of each of the four.
        assert by_name[f"{name} [kernel]"] == pytest.approx(_device_us(records, name), abs=8.0), kernels
        assert by_name[f"{name} [kernel]"] > 0.5 * _device_us(records, name)


def test_legacy_autograd_profiler_reports_device_time():
    a = torch.randn(256, 256, device=DEV)
    torch.neuron.synchronize()
    before = len(neuron_sim.timeline(0))
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        torch.mm(a, a)
    records = _records_between(before)
    mm = _event(prof, "aten::mm")
    # The legacy route keeps whole microseconds.
    assert mm.device_time_total == pytest.approx(_device_us(records, "aten::mm"), abs=1.0)
    assert mm.device_time_total > 0


def test_a_collective_is_on_the_device_lane_with_bytes_and_algorithm(tmp_path):
    code = textwrap.dedent(f"""
        import json, os, socket, datetime
        import torch, torch_neuron, torch.distributed as dist
        from torch.profiler import profile, ProfilerActivity
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=30))
        t = torch.ones(1024, device="neuron")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            dist.all_reduce(t)
            torch.neuron.synchronize()
        prof.export_chrome_trace({str(tmp_path / "c.json")!r})
        dist.destroy_process_group()
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    with open(tmp_path / "c.json") as f:
        events = json.load(f)["traceEvents"]
    coll = [e for e in events if e.get("cat") == "kernel" and e["args"].get("model") == "interconnect"]
    assert coll, [e["name"] for e in events if e.get("cat") == "kernel"]
    assert coll[0]["args"]["bytes read"] == 4096
    assert "algo=" in coll[0]["args"]["detail"]
