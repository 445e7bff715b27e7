// scaled_dot_product_attention on `neuron`: the backend choice and the fused kernel.
//
// SDPA picks its backend per device. Neuron makes the choice CPU makes for the same
// arguments, and where CPU would run its fused flash kernel, neuron runs that kernel
// too through the entry point reserved for PrivateUse1 backends
// (_scaled_dot_product_fused_attention_overrideable); everything else takes the math
// decomposition, as on CPU.
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "aten/DirectCall.h"

namespace torch_neuron {

int64_t choose_sdp_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                           std::optional<double> scale, bool enable_gqa) {
  // Nested inputs need strided nested tensors on the device (the math path, and the path jagged
  // tensors take when their ragged dim is the sequence), which neuron has no kernels for.
  const bool mask_nested = mask.has_value() && mask->defined() && mask->is_nested();
  auto kind = [](const at::Tensor& t) {
    if (!t.is_nested()) return "dense";
    return t.layout() == c10::kStrided ? "nested (torch.strided)" : "nested (torch.jagged)";
  };
  TORCH_CHECK_NOT_IMPLEMENTED(
      !q.is_nested() && !k.is_nested() && !v.is_nested() && !mask_nested,
      "scaled_dot_product_attention on ", q.device(), " does not support nested tensors (query: ", kind(q),
      ", key: ", kind(k), ", value: ", kind(v), mask.has_value() && mask->defined() ? ", attn_mask: " : "",
      mask.has_value() && mask->defined() ? kind(*mask) : "",
      "): neuron has no strided nested tensor kernels, and jagged tensors whose ragged dim is the "
      "sequence dim need them. Pass padded dense tensors with an attn_mask instead "
      "(torch.nested.to_padded_tensor)");
  HostScope scope(q.device().index());
  // CPU's rules read requires_grad (a mask that requires grad rules its fused kernel out,
  // which has no mask gradient), so the aliases carry it.
  auto host = [&scope](const at::Tensor& t) {
    at::Tensor h = scope.alias(t);
    if (t.requires_grad() && !h.requires_grad()) h.set_requires_grad(true);
    return h;
  };
  std::optional<at::Tensor> hmask;
  if (mask.has_value() && mask->defined()) hmask = host(*mask);
  const int64_t cpu_choice =
      at::cpu::_fused_sdp_choice(host(q), host(k), host(v), hmask, dropout_p, is_causal, scale, enable_gqa);
  return cpu_choice == static_cast<int64_t>(at::SDPBackend::flash_attention)
             ? static_cast<int64_t>(at::SDPBackend::overrideable)
             : static_cast<int64_t>(at::SDPBackend::math);
}

double attention_flops(const at::Tensor& q, const at::Tensor& k) {
  // Two matmuls of [L, E] x [E, S] per batch and head.
  return 4.0 * double(q.numel()) * double(k.size(-2));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale) {
  NEURON_OP_INFO("aten::_scaled_dot_product_fused_attention_overrideable");
  TORCH_CHECK(dropout_p == 0.0, "neuron: ", info.name, " has no dropout (dropout_p=", dropout_p,
              "); scaled_dot_product_attention with dropout takes the math path on neuron, as on CPU");
  TORCH_CHECK(!return_debug_mask, "neuron: ", info.name, " returns no debug attention mask");
  const at::Tensor bias = attn_bias.has_value() ? *attn_bias : at::Tensor();
  const BorrowedArgs args(q, k, v, bias, dropout_p, is_causal, return_debug_mask, scale);
  DirectCall c(info, {&q, &k, &v, &bias}, args.values());
  c.set_flops(attention_flops(q, k));
  at::Tensor hq = c.in(q), hk = c.in(k), hv = c.in(v);
  std::optional<at::Tensor> hbias;
  if (bias.defined()) hbias = c.in(bias);
  // Without values (shape-only execution) the dispatcher's meta kernel gives the shapes.
  auto [out, lse] = c.valueless()
                        ? at::_scaled_dot_product_flash_attention_for_cpu(hq, hk, hv, dropout_p, is_causal, hbias, scale)
                        : at::cpu::_scaled_dot_product_flash_attention_for_cpu(hq, hk, hv, dropout_p, is_causal, hbias,
                                                                               scale);
  if (C10_UNLIKELY(c.native() && native_executor() != nullptr)) {
    run_numerics(info, q.scalar_type(),
                 {hq, hk, hv, hbias.has_value() ? c10::IValue(*hbias) : c10::IValue(), dropout_p, is_causal,
                  return_debug_mask, scale},
                 {out, lse});
  }
  at::Tensor rout = c.result(out), rlse = c.result(lse);
  c.finish(rout);
  auto none = at::empty({0}, q.options().dtype(at::kLong));
  return {rout, rlse, none, none, c10::SymInt(q.size(-2)), c10::SymInt(k.size(-2)), none, none,
          at::empty({0}, q.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, c10::SymInt max_q,
    c10::SymInt max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  NEURON_OP_INFO("aten::_scaled_dot_product_fused_attention_overrideable_backward");
  // Autograd passes an undefined gradient when the output's gradient is known to be zero.
  if (!grad_out.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  TORCH_CHECK(!(grad_input_mask[3] && attn_bias.defined()), "neuron: ", info.name,
              " computes no gradient for attn_mask; a mask that requires grad needs the math path "
              "(torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH))");
  // The sequence-offset and philox placeholders are empty and unused by the kernel.
  const c10::IValue unused;
  const BorrowedArgs args(grad_out, q, k, v, attn_bias, grad_input_mask, out, lse, unused, unused,
                          max_q, max_k, dropout_p, is_causal, unused, unused, scale);
  DirectCall c(info, {&grad_out, &q, &k, &v, &attn_bias, &out, &lse}, args.values());
  c.set_flops(2.5 * attention_flops(q, k));
  at::Tensor hg = c.in(grad_out), hq = c.in(q), hk = c.in(k), hv = c.in(v), ho = c.in(out), hl = c.in(lse);
  std::optional<at::Tensor> hbias;
  if (attn_bias.defined()) hbias = c.in(attn_bias);
  auto [gq, gk, gv] = c.valueless() ? at::_scaled_dot_product_flash_attention_for_cpu_backward(
                                          hg, hq, hk, hv, ho, hl, dropout_p, is_causal, hbias, scale)
                                    : at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
                                          hg, hq, hk, hv, ho, hl, dropout_p, is_causal, hbias, scale);
  if (C10_UNLIKELY(c.native() && native_executor() != nullptr)) {
    run_numerics(info, q.scalar_type(),
                 {hg, hq, hk, hv, hbias.has_value() ? c10::IValue(*hbias) : c10::IValue(), grad_input_mask,
                  ho, hl, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
                  philox_offset, scale},
                 {gq, gk, gv});
  }
  at::Tensor rq = c.result(gq), rk = c.result(gk), rv = c.result(gv);
  c.finish(rq);
  return {rq, rk, rv, at::Tensor()};
}

}  // namespace torch_neuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuron::choose_sdp_backend)
}  // namespace at::native

namespace torch_neuron {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // torch._fused_sdp_choice on neuron answers with the backend neuron's SDPA takes, as CUDA's
  // answers with CUDA's (the host fallback would answer with CPU's).
  m.impl("_fused_sdp_choice", TORCH_FN(choose_sdp_backend));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fused_attention_backward));
}

}  // namespace torch_neuron
