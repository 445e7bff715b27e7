# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Natively verified ATen overloads (`python -m tools.overloads`, `make test-native-verified`):
the recorder keeps a model's own native calls, the verifier replays them on neuron under device
numerics against CPU and fails wrong values and host execution; a fixed sample of the committed
list is re-recorded from a model of the nine-model test and re-verified; the document is
generated from the committed data."""
import os
import sys

import pytest
import torch
import torch_neuron
from torch_neuron.native.recording import NativeCallRecorder, RecordedCall

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tools.overloads import document  # noqa: E402
from tools.overloads.verify import verify  # noqa: E402

pytestmark = pytest.mark.timeout(300)
DEV = torch.device("neuron", 0)

# Overloads llama (one of the nine) executes natively in fp32 and under bf16 autocast.
SAMPLE = (
    "aten::_foreach_addcdiv_.ScalarList", "aten::_foreach_lerp_.Scalar", "aten::_foreach_sqrt",
    "aten::_log_softmax", "aten::_log_softmax_backward_data",
    "aten::_scaled_dot_product_fused_attention_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
    "aten::add.Tensor", "aten::cat", "aten::embedding_dense_backward", "aten::index_select",
    "aten::mean.dim", "aten::mm", "aten::mul.Tensor", "aten::neg", "aten::nll_loss_forward",
    "aten::nll_loss_backward", "aten::rsqrt", "aten::silu", "aten::silu_backward",
)


@pytest.fixture(scope="module")
def llama_calls():
    pytest.importorskip("transformers")
    from tools.models import training

    torch_neuron.set_fallback_warnings(False)
    with NativeCallRecorder() as rec:
        record = training.run_architecture("llama", bf16=True)
    assert record["status"] == "pass", record.get("error")
    return rec.calls


def test_document_is_generated_from_the_committed_data_and_the_op_table():
    data = document.load()
    with open(document.DOCUMENT) as f:
        assert f.read() == document.render(data), "stale: run python -m tools.overloads document --write"
    listed = document.verified(data)
    assert listed and set(listed) <= set(document.claimed_overloads())
    for op in listed:
        dtypes = data["overloads"][op]["dtypes"].values()
        assert all(d["result"] == "pass" for d in dtypes) and any(d["ragged"] for d in dtypes), op


def test_recorder_keeps_the_most_ragged_call_with_its_layout():
    x = torch.randn(130, 7)
    aligned = torch.randn(128, 4).to(DEV)
    with NativeCallRecorder() as rec:
        torch.exp(aligned)
        torch.exp(x.to(DEV).t())                    # ragged and transposed
        torch.exp(x[:1, :2].to(DEV))                # ragged but within one partition row
    r = rec.calls[("aten::exp", "Float")]
    assert r.executions == 3
    assert r.call.raggedness() == "elements" and r.call.shapes() == [[7, 130]]
    (arg,) = r.call.arguments_on("cpu")[0]
    assert arg.stride() == (1, 7)
    torch.testing.assert_close(arg, x.t(), rtol=0, atol=0)


def test_verifier_passes_a_native_call_and_fails_host_execution():
    a, b = torch.randn(130, 7), torch.randn(130, 7)
    assert verify(RecordedCall.capture("aten::add.Tensor", [a, b, 1])) == {"result": "pass"}
    # float64 is outside the kernels' dtypes: the replay runs on the host and must not count.
    res = verify(RecordedCall.capture("aten::add.Tensor", [a.double(), b.double(), 1]))
    assert res["result"] == "fail" and "not native on replay" in res["reason"], res


def test_verifier_fails_wrong_kernel_values(monkeypatch):
    from neuron_kernels import adapters
    call = RecordedCall.capture("aten::exp", [torch.randn(130, 7)])
    assert verify(call) == {"result": "pass"}
    monkeypatch.setattr(adapters, "exp", adapters.neg)
    res = verify(call)
    assert res["result"] == "fail" and "result 0" in res["reason"], res


def test_in_place_forms_compare_the_written_argument(monkeypatch):
    from neuron_kernels import adapters
    call = RecordedCall.capture("aten::exp_", [torch.randn(130, 7)])
    before = verify(call)
    monkeypatch.setattr(adapters, "exp", adapters.neg)
    after = verify(call)
    assert before == {"result": "pass"} and after["result"] == "fail", (before, after)


def test_sample_of_the_list_verifies_on_a_models_own_arguments(llama_calls):
    data = document.load()
    listed = set(document.verified(data))
    missing = [op for op in SAMPLE if op not in listed]
    assert not missing, f"the committed list lacks {missing}"
    failures = []
    for op in SAMPLE:
        keys = [k for k in llama_calls if k[0] == op]
        assert keys, f"llama did not execute {op} natively"
        for key in keys:
            call = llama_calls[key].call
            res = verify(call)
            if res["result"] != "pass":
                failures.append(f"{key} {call.shapes()}: {res['reason']}")
        assert any(llama_calls[k].call.raggedness() for k in keys) or any(
            d["ragged"] for d in data["overloads"][op]["dtypes"].values()), op
    assert not failures, "\n".join(failures)


def test_topk_indices_are_checked_through_the_values_they_select(monkeypatch):
    # a fresh router's equal scores: CPU's order among ties (libstdc++'s nth_element) is not torch's
    # contract, the selected values are
    call = RecordedCall.capture("aten::topk", [torch.full((16, 4), 0.5), 2, 1, True, True])
    assert verify(call) == {"result": "pass"}
    from neuron_kernels import adapters
    real = adapters.topk

    def shifted(*a, **kw):      # values right, indices pointing one past them
        kc = real(*a, **kw)
        return adapters.KernelCall(kc.kernel, kc.args, kc.kwargs, lambda o: (lambda v, i: (v, (i + 1) % 4))(
            *kc.post(o)))
    monkeypatch.setattr(adapters, "topk", shifted)
    distinct = RecordedCall.capture("aten::topk", [torch.randn(16, 4), 2, 1, True, True])
    res = verify(distinct)
    assert res["result"] == "fail" and "result 1" in res["reason"], res


def test_unsorted_topk_is_compared_in_sorted_order():
    x = torch.randn(16, 9)
    assert verify(RecordedCall.capture("aten::topk", [x, 3, 1, True, False])) == {"result": "pass"}


def test_convolutions_are_replayed_against_cpus_convolution():
    x, w, b = torch.randn(2, 3, 9, 7), torch.randn(4, 3, 3, 3), torch.randn(4)
    fwd = RecordedCall.capture("aten::convolution_overrideable", [x, w, b, [1, 2], [1, 1], [1, 1], False, [0, 0], 1])
    assert verify(fwd) == {"result": "pass"}
    g = torch.randn(2, 4, 9, 4)
    bwd = RecordedCall.capture("aten::convolution_backward_overrideable",
                               [g, x, w, [1, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]])
    assert verify(bwd) == {"result": "pass"}
