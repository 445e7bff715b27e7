// Unboxed host kernels for the most frequent ops. They compute exactly what the
// boxed host fallback computes (the CPU kernel over aliases of device memory)
// but skip boxing and the structured-op wrapper that allocates the output
// before calling the out= variant, which dominates the cost of small ops.
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/add_cpu_dispatch.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/div_cpu_dispatch.h>
#include <ATen/ops/index_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/ops/mul_cpu_dispatch.h>
#include <ATen/ops/sub_cpu_dispatch.h>
#include <ATen/ops/sum_cpu_dispatch.h>
#include <torch/library.h>

#include <optional>

#include "aten/HostExecution.h"
#include "aten/OpAccounting.h"
#include "runtime/NeuronRuntime.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

double nbytes(const at::Tensor& t) { return double(t.numel()) * double(t.element_size()); }

class DirectCall {
 public:
  // `args`: the call's arguments in schema order, for the native decision's attribute checks.
  DirectCall(OpInfo& info, std::initializer_list<const at::Tensor*> tensors,
             c10::ArrayRef<c10::IValue> args = {})
      : info_(info) {
    for (const at::Tensor* t : tensors) {
      if (!t->defined()) continue;
      if (t->device().type() == kNeuron) {
        if (device_ < 0) {
          device_ = t->device().index();
          dtype_ = t->scalar_type();
        } else {
          TORCH_CHECK(t->device().index() == device_,
                      "Expected all tensors to be on the same device, but found at least two "
                      "devices, neuron:", static_cast<int>(device_), " and ", t->device(),
                      "! (when running ", info_.name, " on neuron)");
        }
      } else if (t->device().is_cpu() && t->dim() > 0 && !info_.accepts_cpu_tensors) {
        cpu_tensor_ = true;
      }
    }
    TORCH_INTERNAL_ASSERT(device_ >= 0, info_.name, ": no neuron tensor argument");
    TORCH_CHECK(!cpu_tensor_,
                "Expected all tensors to be on the same device, but found at least two devices, neuron:",
                static_cast<int>(device_), " and cpu! (when running ", info_.name, " on neuron)");
    if (!info_.native_entry.empty()) decide_native(info_, dtype_, args, cost_);
    if (!cost_.native) on_fallback(info_, dtype_);
    scope_.emplace(device_);
  }

  at::Tensor in(const at::Tensor& t) {
    if (t.defined() && t.device().type() == kNeuron) cost_.bytes_in += nbytes(t);
    return scope_->alias(t);
  }

  void set_matmul_k(int64_t k) { matmul_k_ = double(k); }
  void set_flops(double flops) { flops_ = flops; }
  bool native() const { return cost_.native; }

  // A result of a kernel with several outputs; `finish` accounts the call once.
  at::Tensor result(const at::Tensor& host) {
    at::Tensor r = scope_->result(host);
    if (r.defined()) bytes_out_ += nbytes(r);
    return r;
  }
  void finish(const at::Tensor& primary) {
    account_result(primary);
  }

  at::Tensor out(const at::Tensor& host) {
    at::Tensor r = scope_->result(host);
    account_result(r);
    return r;
  }

  void inplace(const at::Tensor& self) {
    scope_->sync_mutated(self);
    account_result(self);
  }

 private:
  void account_result(const at::Tensor& r) {
    cost_.bytes_out = bytes_out_ > 0 ? bytes_out_ : nbytes(r);
    cost_.low_precision = dtype_ == c10::ScalarType::BFloat16 || dtype_ == c10::ScalarType::Half;
    cost_.flops = flops_ > 0 ? flops_
                  : info_.cls == OpClass::Matmul ? 2.0 * double(r.numel()) * matmul_k_
                                                 : std::max(double(r.numel()),
                                                            cost_.bytes_in / std::max<double>(1, r.element_size()));
    account(info_, device_, dtype_, /*native=*/false, cost_);
  }

  OpInfo& info_;
  c10::DeviceIndex device_ = -1;
  c10::ScalarType dtype_ = c10::ScalarType::Undefined;
  bool cpu_tensor_ = false;
  double matmul_k_ = 0;
  double flops_ = 0;
  double bytes_out_ = 0;
  CostInputs cost_;
  std::optional<HostScope> scope_;
};

#define NEURON_OP_INFO(NAME)                 \
  static OpInfo& info = op_info_by_name(NAME)

// Device numerics (rare, and dominated by the kernel's simulation) takes the boxed path,
// whose executor sees every argument and result.
template <typename... Args>
at::Tensor boxed_host_call(const char* name, const char* overload, Args&&... args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack;
  torch::jit::push(stack, std::forward<Args>(args)...);
  host_fallback(op, &stack);
  return stack.back().toTensor();
}

#define NEURON_DEVICE_NUMERICS(NAME, OVERLOAD, ...)       \
  if (C10_UNLIKELY(native_executor() != nullptr)) {       \
    return boxed_host_call(NAME, OVERLOAD, __VA_ARGS__);  \
  }

at::Tensor add_tensor(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  NEURON_DEVICE_NUMERICS("aten::add", "Tensor", a, b, alpha);
  NEURON_OP_INFO("aten::add.Tensor");
  const BorrowedArgs args(a, b, alpha);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::add(c.in(a), c.in(b), alpha));
}

at::Tensor sub_tensor(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  NEURON_DEVICE_NUMERICS("aten::sub", "Tensor", a, b, alpha);
  NEURON_OP_INFO("aten::sub.Tensor");
  const BorrowedArgs args(a, b, alpha);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::sub(c.in(a), c.in(b), alpha));
}

at::Tensor mul_tensor(const at::Tensor& a, const at::Tensor& b) {
  NEURON_DEVICE_NUMERICS("aten::mul", "Tensor", a, b);
  NEURON_OP_INFO("aten::mul.Tensor");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::mul(c.in(a), c.in(b)));
}

at::Tensor div_tensor(const at::Tensor& a, const at::Tensor& b) {
  NEURON_DEVICE_NUMERICS("aten::div", "Tensor", a, b);
  NEURON_OP_INFO("aten::div.Tensor");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::div(c.in(a), c.in(b)));
}

at::Tensor& add_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (C10_UNLIKELY(native_executor() != nullptr)) {
    boxed_host_call("aten::add_", "Tensor", self, other, alpha);
    return self;
  }
  NEURON_OP_INFO("aten::add_.Tensor");
  const BorrowedArgs args(self, other, alpha);
  DirectCall c(info, {&self, &other}, args.values());
  at::Tensor h = c.in(self);
  at::cpu::add_(h, c.in(other), alpha);
  c.inplace(self);
  return self;
}

at::Tensor& mul_inplace(at::Tensor& self, const at::Tensor& other) {
  if (C10_UNLIKELY(native_executor() != nullptr)) {
    boxed_host_call("aten::mul_", "Tensor", self, other);
    return self;
  }
  NEURON_OP_INFO("aten::mul_.Tensor");
  const BorrowedArgs args(self, other);
  DirectCall c(info, {&self, &other}, args.values());
  at::Tensor h = c.in(self);
  at::cpu::mul_(h, c.in(other));
  c.inplace(self);
  return self;
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype) {
  NEURON_DEVICE_NUMERICS("aten::sum", "dim_IntList", self, dim, keepdim, dtype);
  NEURON_OP_INFO("aten::sum.dim_IntList");
  const BorrowedArgs args(self, dim, keepdim, dtype);
  DirectCall c(info, {&self}, args.values());
  return c.out(at::cpu::sum(c.in(self), dim, keepdim, dtype));
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  NEURON_DEVICE_NUMERICS("aten::mm", "", a, b);
  NEURON_OP_INFO("aten::mm");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  if (a.dim() > 0) c.set_matmul_k(a.size(-1));
  return c.out(at::cpu::mm(c.in(a), c.in(b)));
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  NEURON_DEVICE_NUMERICS("aten::bmm", "", a, b);
  NEURON_OP_INFO("aten::bmm");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  if (a.dim() > 0) c.set_matmul_k(a.size(-1));
  return c.out(at::cpu::bmm(c.in(a), c.in(b)));
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_DEVICE_NUMERICS("aten::addmm", "", self, m1, m2, beta, alpha);
  NEURON_OP_INFO("aten::addmm");
  const BorrowedArgs args(self, m1, m2, beta, alpha);
  DirectCall c(info, {&self, &m1, &m2}, args.values());
  if (m1.dim() > 0) c.set_matmul_k(m1.size(-1));
  return c.out(at::cpu::addmm(c.in(self), c.in(m1), c.in(m2), beta, alpha));
}

at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  NEURON_OP_INFO("aten::index.Tensor");
  DirectCall c(info, {&self});
  c10::List<std::optional<at::Tensor>> host_indices;
  host_indices.reserve(indices.size());
  for (const std::optional<at::Tensor>& i : indices) {
    if (i.has_value() && i->defined()) {
      TORCH_CHECK(i->device().type() != kNeuron || i->device() == self.device(),
                  "Expected all tensors to be on the same device, but found at least two devices, ",
                  self.device(), " and ", i->device(), "! (when running aten::index.Tensor on neuron)");
      host_indices.push_back(c.in(*i));
    } else {
      host_indices.push_back(std::nullopt);
    }
  }
  return c.out(at::cpu::index(c.in(self), host_indices));
}

}  // namespace

// ---- scaled_dot_product_attention ----
// SDPA picks its backend per device. Neuron makes the choice CPU makes for the same
// arguments, and where CPU would run its fused flash kernel, neuron runs that kernel
// too through the entry point reserved for PrivateUse1 backends
// (_scaled_dot_product_fused_attention_overrideable); everything else takes the math
// decomposition, as on CPU.
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

void run_numerics(const OpInfo& info, c10::ScalarType dtype, std::vector<c10::IValue> host_args,
                  std::vector<c10::IValue> host_results) {
  if (NativeExecutor ex = native_executor()) ex(info, dtype, host_args, host_args, host_results);
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
  auto [out, lse] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(hq, hk, hv, dropout_p, is_causal, hbias, scale);
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
  auto [gq, gk, gv] = at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
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
  m.impl("add.Tensor", TORCH_FN(add_tensor));
  m.impl("sub.Tensor", TORCH_FN(sub_tensor));
  m.impl("mul.Tensor", TORCH_FN(mul_tensor));
  m.impl("div.Tensor", TORCH_FN(div_tensor));
  m.impl("add_.Tensor", TORCH_FN(add_inplace));
  m.impl("mul_.Tensor", TORCH_FN(mul_inplace));
  m.impl("sum.dim_IntList", TORCH_FN(sum_dim));
  m.impl("mm", TORCH_FN(mm));
  m.impl("bmm", TORCH_FN(bmm));
  m.impl("addmm", TORCH_FN(addmm));
  m.impl("index.Tensor", TORCH_FN(index_tensor));
}

}  // namespace torch_neuron
