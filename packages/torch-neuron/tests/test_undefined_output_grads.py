# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Every backward the backend registers handles undefined output gradients (autograd's way of
saying "zero"): torch.autograd.gradcheck(check_undefined_grad=True) in float64 passes on
`neuron` wherever it passes on CPU, through the backend's fused attention, convolution and
fused RNN cell kernels."""

import pytest
import torch
import torch.nn.functional as F
import torch_neuron
from torch import nn
from torch.autograd import gradcheck

pytestmark = pytest.mark.timeout(300)

DEV = torch.device("neuron", 0)


def _inputs(shapes, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*s, generator=g, dtype=torch.float64).to(device).requires_grad_()
                 for s in shapes)


def _gradcheck_both(fn_for, shapes, ops_on_neuron):
    """gradcheck on CPU and on neuron; the neuron run must go through `ops_on_neuron`."""
    assert gradcheck(fn_for("cpu"), _inputs(shapes, "cpu"), check_undefined_grad=True)
    torch_neuron.clear_op_tracking()
    assert gradcheck(fn_for(DEV), _inputs(shapes, DEV), check_undefined_grad=True)
    ran = torch_neuron.get_executed_ops()
    for op in ops_on_neuron:
        assert op in ran, (op, sorted(ran))


SDPA_FWD = "aten::_scaled_dot_product_fused_attention_overrideable"
SDPA_BWD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


def test_fused_attention():
    _gradcheck_both(lambda dev: (lambda q, k, v: F.scaled_dot_product_attention(q, k, v)),
                    [(1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)], [SDPA_FWD, SDPA_BWD])


def test_fused_attention_causal_with_constant_mask():
    mask = torch.randn(3, 3, dtype=torch.float64)

    def fn_for(dev):
        m = mask.to(dev)
        return lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                                F.scaled_dot_product_attention(q, k, v, is_causal=True))
    _gradcheck_both(fn_for, [(1, 2, 3, 4)] * 3, [SDPA_FWD, SDPA_BWD])


def test_fused_attention_grouped_query_heads():
    _gradcheck_both(lambda dev: (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
                    [(1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)], [SDPA_FWD, SDPA_BWD])


def test_attention_with_a_mask_that_requires_grad():
    # CPU's rules send this to the math path, so the fused kernel must not run on neuron.
    def fn_for(dev):
        return lambda q, k, v, bias: F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    shapes = [(1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 3, 5)]
    _gradcheck_both(fn_for, shapes, [])
    assert SDPA_FWD not in torch_neuron.get_executed_ops()


def _module_fn(make, dev):
    torch.manual_seed(0)
    module = make().double().to(dev)
    return lambda x: module(x)


@pytest.mark.parametrize("make", [
    lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, dropout=0.0, batch_first=True),
    lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, dropout=0.0, batch_first=True,
                                   norm_first=True), num_layers=2, enable_nested_tensor=False),
], ids=["TransformerEncoderLayer", "TransformerEncoder"])
def test_transformer_encoder(make):
    _gradcheck_both(lambda dev: _module_fn(make, dev), [(2, 3, 8)], [SDPA_FWD, SDPA_BWD])


CONV_OPS = ["aten::convolution_overrideable", "aten::convolution_backward_overrideable"]


def test_convolution():
    _gradcheck_both(lambda dev: (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1)),
                    [(1, 2, 5, 5), (3, 2, 3, 3), (3,)], CONV_OPS)


def test_transposed_grouped_convolution():
    _gradcheck_both(lambda dev: (lambda x, w: F.conv_transpose1d(x, w, stride=2, groups=2)),
                    [(2, 4, 5), (4, 1, 3)], CONV_OPS)


def test_fused_lstm_cell():
    # Two outputs: gradcheck also leaves each of hy and cy undefined in turn.
    _gradcheck_both(lambda dev: (lambda x, h, c, wi, wh, bi, bh: torch.lstm_cell(x, (h, c), wi, wh, bi, bh)),
                    [(2, 3), (2, 4), (2, 4), (16, 3), (16, 4), (16,), (16,)],
                    ["aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl"])


def test_fused_lstm_cell_without_bias():
    _gradcheck_both(lambda dev: (lambda x, h, c, wi, wh: torch.lstm_cell(x, (h, c), wi, wh)),
                    [(2, 3), (2, 4), (2, 4), (16, 3), (16, 4)],
                    ["aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_lstm_cell_backward_impl"])


def test_fused_gru_cell():
    _gradcheck_both(lambda dev: (lambda x, h, wi, wh, bi, bh: torch.gru_cell(x, h, wi, wh, bi, bh)),
                    [(2, 3), (2, 4), (12, 3), (12, 4), (12,), (12,)],
                    ["aten::_thnn_fused_gru_cell", "aten::_thnn_fused_gru_cell_backward"])


def test_lstm_and_gru_modules():
    # The cells as modules, chained: the GRU consumes the LSTM's hidden state, its cell state is
    # an output of its own, so each cell's backward sees one gradient left undefined in turn.
    def fn_for(dev):
        torch.manual_seed(0)
        lstm = nn.LSTMCell(3, 4).double().to(dev)
        gru = nn.GRUCell(3, 4).double().to(dev)
        def fn(x):
            h, c = lstm(x)
            return gru(x, h), c
        return fn
    _gradcheck_both(fn_for, [(2, 3)], ["aten::_thnn_fused_lstm_cell_backward_impl",
                                       "aten::_thnn_fused_gru_cell_backward"])
