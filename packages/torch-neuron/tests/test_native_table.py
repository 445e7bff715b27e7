# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The op table's torch-side columns against torch, the bridge's binders and the generated
coverage document; the bridge's dtype map and zero-copy host views."""

import os

import numpy as np
import pytest
import torch
import torch_neuron
from torch_neuron.native import binders, bridge, coverage
from torch_neuron.native.install import executed_as, same_argument_overloads

neuron_kernels = pytest.importorskip("neuron_kernels")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROWS = list(neuron_kernels.table().values())
DEV = torch.device("neuron", 0)


def test_binder_keys_equal_the_table_rows_binders():
    assert {e.columns.get("binder") for e in ROWS} == set(binders.BINDERS)


@pytest.mark.parametrize("entry", ROWS, ids=lambda e: e.aten)
def test_executed_as_lists_the_same_argument_forms_torch_has(entry):
    listed = entry.columns["executed_as"]
    assert len(set(listed)) == len(listed)
    same = same_argument_overloads(entry.aten)
    base = entry.aten.partition(".")[0]
    # Every out=/in-place form with the op's arguments, and nothing else of the op's own name.
    assert sorted(n for n in listed if n.partition(".")[0] in (base, base + "_")) == sorted(same)
    for name in listed:
        binders.schema(name)   # an overload torch has (RuntimeError otherwise)


@pytest.mark.parametrize("entry", ROWS, ids=lambda e: e.aten)
def test_scalar_forms_and_cost_classes_are_table_rows_and_known_classes(entry):
    assert entry.columns["cost_class"] in ("matmul", "reduction", "elementwise")
    form = entry.columns.get("scalar_form")
    if form is not None:
        assert entry.columns["binder"] == "binary"
        assert neuron_kernels.table()[form["entry"]].columns["binder"] == "scalar"
        assert form["operand"] in binders.SCALAR_OPERANDS and isinstance(form["commutes"], bool)


@pytest.mark.parametrize("entry", ROWS, ids=lambda e: e.aten)
def test_dispatched_is_true_or_a_reason(entry):
    d = entry.columns["dispatched"]
    assert d is True or (isinstance(d, str) and len(d) > 10)


def test_rows_the_backend_executes_are_registered_native():
    x = torch.randn(4, 8, device=DEV)
    torch_neuron.clear_op_tracking()
    torch.add(x, x, out=torch.empty_like(x))   # aten::add.out: executed as aten::add.Tensor
    x.exp_()                                    # aten::exp_: executed as aten::exp
    counts = torch_neuron.get_executed_ops()
    assert counts["aten::add.out"] == {"native": 1, "fallback": 0}, counts
    assert counts["aten::exp_"] == {"native": 1, "fallback": 0}, counts
    assert "aten::add.out" in executed_as(neuron_kernels.table()["aten::add.Tensor"])


def test_coverage_document_is_generated_from_the_table():
    with open(os.path.join(ROOT, coverage.DOCUMENT)) as f:
        committed = f.read()
    assert committed == coverage.render(), ("stale: run python -m torch_neuron.native.coverage --write "
                                            "from the repository root")
    for e in ROWS:
        assert f"| `{e.aten}` |" in committed


def test_coverage_check_fails_on_a_stale_document(tmp_path):
    doc = tmp_path / coverage.DOCUMENT
    doc.parent.mkdir(parents=True)
    doc.write_text(coverage.render().replace("aten::mm", "aten::mv", 1))
    assert coverage.main(["--check", "--root", str(tmp_path)]) == 1
    assert coverage.main(["--write", "--root", str(tmp_path)]) == 0
    assert coverage.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_table_dtype_has_a_torch_dtype_and_round_trips_through_the_isa():
    carried = {torch.bool: "uint8", torch.int64: "int32", torch.float64: None}   # the dtype policy
    for e in ROWS:
        for d in e.dtypes:
            t = bridge.torch_dtype(d)
            assert bridge.table_name(t) == d
            if t in carried:
                with pytest.raises(TypeError, match="has no tile-language element type"):
                    bridge.isa_dtype(t, "x")
                continue
            assert bridge.torch_of_isa(bridge.isa_dtype(t, "x"), "x") is t
    with pytest.raises(TypeError, match="torch.int64 has no tile-language element type"):
        bridge.isa_dtype(torch.int64, "kernel argument 0")
    assert bridge.operand_dtype(torch.int64) == "int32"   # index operands, cast by the adapters


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32], ids=str)
def test_host_view_of_a_neuron_tensor_is_its_device_memory(dtype):
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(dtype).to(DEV)
    v = bridge.host_view(t)
    assert v.shape == (2, 3)
    np.testing.assert_array_equal(v.astype(np.float32), np.arange(6, dtype=np.float32).reshape(2, 3))
    v[1, 2] = 40                              # a write through the view is the tensor's new value
    assert t.cpu().float()[1, 2].item() == 40.0
    back = bridge.from_numpy(np.asarray(v))
    assert back.dtype == dtype and torch.equal(back, t.cpu())


def test_host_view_refuses_a_non_contiguous_tensor():
    t = torch.randn(4, 6, device=DEV).t()
    with pytest.raises(ValueError, match="non-contiguous"):
        bridge.host_view(t)


def _fallback_duration_ns(fn):
    import neuron_sim
    torch.neuron.synchronize()
    before = len(neuron_sim.timeline(0))
    fn()
    torch.neuron.synchronize()
    return [r.duration_ns for r in neuron_sim.timeline(0)[before:]][-1]


MATMUL_FALLBACKS = {  # float64 has no kernel: these run on the host, costed by the backend's class
    "aten::mm": lambda a, b: torch.mm(a, b),
    "aten::bmm": lambda a, b: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)),
    "aten::addmm": lambda a, b: torch.addmm(b[0], a, b),
}


@pytest.mark.parametrize("op", sorted(MATMUL_FALLBACKS))
def test_the_backends_host_cost_class_agrees_with_the_table(op):
    """The backend takes the host cost class from the table's column (registered at install); it
    shows in the modelled duration of a compute-bound fallback (matmul peak vs vector peak)."""
    fn = MATMUL_FALLBACKS[op]
    n = 1024
    a = torch.randn(n, n, dtype=torch.float64, device=DEV)
    b = torch.randn(n, n, dtype=torch.float64, device=DEV)
    got = _fallback_duration_ns(lambda: fn(a, b))
    p = torch_neuron._C.get_device_properties(0)
    nbytes = (3 if op != "aten::addmm" else 3 + 1 / n) * n * n * 8
    memory = nbytes / p["hbm_bandwidth"] * 1e9
    host = nbytes / p["host_link_bandwidth"] * 1e9 + 2 * p["dma_fixed_overhead_ns"]
    by_class = {
        "matmul": p["launch_overhead_ns"] + max(2.0 * n ** 3 / p["peak_flops_fp32"] * 1e9, memory) + host,
        "other": p["launch_overhead_ns"] + max(2.0 * n * n / p["vector_flops_fp32"] * 1e9, memory) + host,
    }
    table_class = neuron_kernels.table()[op].columns["cost_class"]
    want = by_class["matmul" if table_class == "matmul" else "other"]
    assert abs(by_class["matmul"] - by_class["other"]) > 0.03 * want    # the classes are distinguishable
    assert got == pytest.approx(want, rel=0.01), (op, table_class, got, by_class)


def test_host_only_contractions_cost_at_the_tensor_engine_peak():
    """aten::baddbmm has no table row; the host-only list classes it matmul (2 * B * M * N * K flops at
    TensorE's rate), which shows in the duration of a compute-bound call."""
    n = 2048
    c, a, b = (torch.randn(1, n, n, device=DEV) for _ in range(3))
    got = _fallback_duration_ns(lambda: torch.baddbmm(c, a, b))
    p = torch_neuron._C.get_device_properties(0)
    nbytes = 4 * n * n * 4
    memory = nbytes / p["hbm_bandwidth"] * 1e9
    host = nbytes / p["host_link_bandwidth"] * 1e9 + 2 * p["dma_fixed_overhead_ns"]
    matmul = p["launch_overhead_ns"] + max(2.0 * n ** 3 / p["peak_flops_fp32"] * 1e9, memory) + host
    other = p["launch_overhead_ns"] + max(2.0 * n * n / p["vector_flops_fp32"] * 1e9, memory) + host
    assert abs(matmul - other) > 0.03 * matmul
    assert got == pytest.approx(matmul, rel=0.01), (got, matmul, other)


def test_an_op_with_a_row_cannot_also_be_host_only():
    from torch_neuron.native import cost_classes
    table = dict(neuron_kernels.table())
    row = table["aten::mm"]
    table["aten::mv"] = type(row)("aten::mv", row.adapter, row.dtypes, "", {"cost_class": "matmul"})
    with pytest.raises(ValueError, match="aten::mv has an op_table.yaml row"):
        cost_classes.classes(table)
