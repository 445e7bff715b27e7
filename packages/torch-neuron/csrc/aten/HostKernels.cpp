// Host kernels for ops that have no CPU kernel a host fallback could run
// (PrivateUse1 convolutions and fused RNN cells route to ops only CUDA
// implements), and for dtypes CUDA supports but CPU does not (integer histc).
// All compute on the host over aliases of device memory.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include "aten/Accounting.h"
#include "aten/DirectCall.h"
#include "aten/CostInputs.h"
#include "aten/HostScope.h"
#include "aten/OpRegistry.h"

namespace torch_neuron {
namespace {

void prepare(const char* op, const at::Tensor& like) {
  OpInfo& info = op_info_by_name(op);
  on_fallback(info, like.scalar_type());
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                    bool transposed, c10::IntArrayRef output_padding,
                                    int64_t groups) {
  NEURON_OP_INFO("aten::convolution_overrideable");
  const at::Tensor b = bias.value_or(at::Tensor());
  check_same_device(info.name, {&input, &weight, &b});
  const BorrowedArgs args(input, weight, b, stride, padding, dilation, transposed, output_padding, groups);
  DirectCall c(info, {&input, &weight, &b}, args.values());
  at::Tensor hin = c.in(input), hw = c.in(weight);
  std::optional<at::Tensor> hb;
  if (b.defined()) hb = c.in(b);
  at::Tensor out = at::convolution(hin, hw, hb, stride, padding, dilation, transposed, output_padding, groups);
  if (C10_UNLIKELY(c.native() && native_executor() != nullptr)) {
    run_numerics(info, input.scalar_type(),
                 {hin, hw, hb.has_value() ? c10::IValue(*hb) : c10::IValue(), stride, padding, dilation, transposed,
                  output_padding, groups},
                 {out});
  }
  // 2 flops per multiply-add: each result element sums C / groups x kernel-size products.
  const double per_out = weight.size(0) > 0 ? double(weight.numel() / weight.size(0)) : 0.0;
  c.set_flops(2.0 * double(out.numel()) * per_out);
  return c.out(out);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  NEURON_OP_INFO("aten::convolution_backward_overrideable");
  // Autograd passes an undefined gradient when the output's gradient is known to be zero.
  if (!grad_output.defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
  check_same_device(info.name, {&grad_output, &input, &weight});
  const BorrowedArgs args(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                          groups, output_mask);
  DirectCall c(info, {&grad_output, &input, &weight}, args.values());
  at::Tensor hg = c.in(grad_output), hin = c.in(input), hw = c.in(weight);
  std::optional<std::vector<int64_t>> bias_sizes;
  if (output_mask[2]) {
    bias_sizes = std::vector<int64_t>{transposed ? weight.size(1) * groups : weight.size(0)};
  }
  auto [gi, gw, gb] = at::convolution_backward(
      hg, hin, hw, bias_sizes ? at::OptionalIntArrayRef(*bias_sizes) : at::OptionalIntArrayRef(), stride,
      padding, dilation, transposed, output_padding, groups, output_mask);
  if (C10_UNLIKELY(c.native() && native_executor() != nullptr)) {
    run_numerics(info, input.scalar_type(),
                 {hg, hin, hw, stride, padding, dilation, transposed, output_padding, groups, output_mask},
                 {gi, gw, gb});
  }
  // The forward's multiply-adds once for each gradient asked for (the bias's is a sum).
  const double per_out = weight.size(0) > 0 ? double(weight.numel() / weight.size(0)) : 0.0;
  const double products = 2.0 * double(grad_output.numel()) * per_out;
  c.set_flops(products * (double(output_mask[0]) + double(output_mask[1])) +
              (output_mask[2] ? double(grad_output.numel()) : 0.0));
  at::Tensor rgi = c.result(gi), rgw = c.result(gw), rgb = c.result(gb);
  c.finish(rgi.defined() ? rgi : (rgw.defined() ? rgw : (rgb.defined() ? rgb : grad_output)));
  return {rgi, rgw, rgb};
}

// LSTM cell, gate order (input, forget, cell, output) as in torch.nn.LSTMCell.
// The workspace holds the activated gates for the backward pass.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor ib = input_bias.value_or(at::Tensor()), hb = hidden_bias.value_or(at::Tensor());
  check_same_device("aten::_thnn_fused_lstm_cell", {&input_gates, &hidden_gates, &cx, &ib, &hb});
  prepare("aten::_thnn_fused_lstm_cell", input_gates);
  HostScope s(input_gates.device().index());
  at::Tensor gates = s.alias(input_gates) + s.alias(hidden_gates);
  if (ib.defined()) gates = gates + s.alias(ib);
  if (hb.defined()) gates = gates + s.alias(hb);
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(),
             o = chunks[3].sigmoid();
  at::Tensor cy = f * s.alias(cx) + i * g;
  at::Tensor hy = o * cy.tanh();
  at::Tensor workspace = at::cat({i, f, g, o}, 1);
  auto out = std::make_tuple(s.result(hy), s.result(cy), s.result(workspace));
  account_host_kernel("aten::_thnn_fused_lstm_cell", input_gates.device().index(),
                      input_gates.scalar_type(), 12.0 * double(cx.numel()),
                      2 * nbytes(input_gates) + nbytes(cx), 6 * nbytes(cx));
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy_opt, const std::optional<at::Tensor>& grad_cy_opt,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const bool have_hy = grad_hy_opt && grad_hy_opt->defined(), have_cy = grad_cy_opt && grad_cy_opt->defined();
  // Neither output has a gradient (undefined means zero): no input has one either.
  if (!have_hy && !have_cy) return {at::Tensor(), at::Tensor(), at::Tensor()};
  prepare("aten::_thnn_fused_lstm_cell_backward_impl", cx);
  HostScope s(cx.device().index());
  auto w = s.alias(workspace).chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  at::Tensor tanh_cy = s.alias(cy).tanh();
  at::Tensor ghy = have_hy ? s.alias(*grad_hy_opt) : at::zeros_like(tanh_cy);
  at::Tensor gcy = ghy * o * (1 - tanh_cy * tanh_cy);
  if (have_cy) gcy = gcy + s.alias(*grad_cy_opt);
  at::Tensor go = ghy * tanh_cy * o * (1 - o);
  at::Tensor gi = gcy * g * i * (1 - i);
  at::Tensor gf = gcy * s.alias(cx) * f * (1 - f);
  at::Tensor gg = gcy * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_cx = gcy * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  auto out = std::make_tuple(s.result(grad_gates), s.result(grad_cx), s.result(grad_bias));
  account_host_kernel("aten::_thnn_fused_lstm_cell_backward_impl", cx.device().index(),
                      cx.scalar_type(), 20.0 * double(cx.numel()), nbytes(workspace) + 3 * nbytes(cx),
                      nbytes(workspace) + nbytes(cx));
  return out;
}

// GRU cell, gate order (reset, update, new) as in torch.nn.GRUCell. The
// workspace holds r, z, n, hx and the hidden part of n's pre-activation.
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates,
                                                  const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx,
                                                  const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor ib = input_bias.value_or(at::Tensor()), hb = hidden_bias.value_or(at::Tensor());
  check_same_device("aten::_thnn_fused_gru_cell", {&input_gates, &hidden_gates, &hx, &ib, &hb});
  prepare("aten::_thnn_fused_gru_cell", input_gates);
  HostScope s(input_gates.device().index());
  at::Tensor ig = s.alias(input_gates), hg = s.alias(hidden_gates);
  if (ib.defined()) ig = ig + s.alias(ib);
  if (hb.defined()) hg = hg + s.alias(hb);
  auto ic = ig.chunk(3, 1), hc = hg.chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid();
  at::Tensor z = (ic[1] + hc[1]).sigmoid();
  at::Tensor n = (ic[2] + r * hc[2]).tanh();
  at::Tensor h = s.alias(hx);
  at::Tensor hy = n + z * (h - n);
  at::Tensor workspace = at::cat({r, z, n, h, hc[2]}, 1);
  auto out = std::make_tuple(s.result(hy), s.result(workspace));
  account_host_kernel("aten::_thnn_fused_gru_cell", input_gates.device().index(),
                      input_gates.scalar_type(), 12.0 * double(hx.numel()),
                      2 * nbytes(input_gates) + nbytes(hx), 6 * nbytes(hx));
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  // Autograd passes an undefined gradient when the output's gradient is known to be zero.
  if (!grad_hy.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  prepare("aten::_thnn_fused_gru_cell_backward", grad_hy);
  HostScope s(grad_hy.device().index());
  auto w = s.alias(workspace).chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  at::Tensor g = s.alias(grad_hy);
  at::Tensor gz = g * (hx - n) * z * (1 - z);
  at::Tensor gn = g * (1 - z) * (1 - n * n);
  at::Tensor ghx = g * z;
  at::Tensor gr = gn * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor gib = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  auto out = std::make_tuple(s.result(grad_input_gates), s.result(grad_hidden_gates), s.result(ghx),
                             s.result(gib), s.result(ghb));
  account_host_kernel("aten::_thnn_fused_gru_cell_backward", grad_hy.device().index(),
                      grad_hy.scalar_type(), 20.0 * double(grad_hy.numel()),
                      nbytes(workspace) + nbytes(grad_hy), 7 * nbytes(grad_hy));
  return out;
}

// CUDA's histc accepts integer inputs (result in the input dtype); CPU's does
// not. Integer values are exact in float64, so the histogram is computed there.
at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                      const at::Scalar& max, at::Tensor& out) {
  check_same_device("aten::histc", {&self, &out});
  prepare("aten::histc", self);
  HostScope s(self.device().index());
  at::Tensor in = s.alias(self);
  at::Tensor dst = s.alias(out);
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    at::Tensor h = at::histc(in.to(at::kDouble), bins, min, max);
    dst.resize_(h.sizes());
    dst.copy_(h);
  } else {
    at::histc_out(dst, in, bins, min, max);
  }
  s.sync_mutated(out);
  account_host_kernel("aten::histc", self.device().index(), self.scalar_type(), double(self.numel()),
                      nbytes(self), nbytes(out));
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  at::Tensor out = at::empty({0}, self.options());
  histc_out(self, bins, min, max, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
  m.impl("histc", TORCH_FN(histc));
  m.impl("histc.out", TORCH_FN(histc_out));
}

}  // namespace torch_neuron
