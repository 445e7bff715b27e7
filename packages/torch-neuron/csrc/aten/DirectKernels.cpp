// Unboxed host kernels for the most frequent ops. They compute exactly what the
// boxed host fallback computes (the CPU kernel over aliases of device memory)
// but skip boxing and the structured-op wrapper that allocates the output
// before calling the out= variant, which dominates the cost of small ops.
#include <ATen/core/Tensor.h>
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

#include "aten/DirectCall.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

#define NEURON_BOXED_ONLY(NAME, OVERLOAD, ...)       \
  if (C10_UNLIKELY(boxed_only())) {                       \
    return boxed_host_call(NAME, OVERLOAD, __VA_ARGS__);  \
  }

at::Tensor add_tensor(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  NEURON_BOXED_ONLY("aten::add", "Tensor", a, b, alpha);
  NEURON_OP_INFO("aten::add.Tensor");
  const BorrowedArgs args(a, b, alpha);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::add(c.in(a), c.in(b), alpha));
}

at::Tensor sub_tensor(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  NEURON_BOXED_ONLY("aten::sub", "Tensor", a, b, alpha);
  NEURON_OP_INFO("aten::sub.Tensor");
  const BorrowedArgs args(a, b, alpha);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::sub(c.in(a), c.in(b), alpha));
}

at::Tensor mul_tensor(const at::Tensor& a, const at::Tensor& b) {
  NEURON_BOXED_ONLY("aten::mul", "Tensor", a, b);
  NEURON_OP_INFO("aten::mul.Tensor");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::mul(c.in(a), c.in(b)));
}

at::Tensor div_tensor(const at::Tensor& a, const at::Tensor& b) {
  NEURON_BOXED_ONLY("aten::div", "Tensor", a, b);
  NEURON_OP_INFO("aten::div.Tensor");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  return c.out(at::cpu::div(c.in(a), c.in(b)));
}

at::Tensor& add_inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (C10_UNLIKELY(boxed_only())) {
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
  if (C10_UNLIKELY(boxed_only())) {
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
  NEURON_BOXED_ONLY("aten::sum", "dim_IntList", self, dim, keepdim, dtype);
  NEURON_OP_INFO("aten::sum.dim_IntList");
  const BorrowedArgs args(self, dim, keepdim, dtype);
  DirectCall c(info, {&self}, args.values());
  return c.out(at::cpu::sum(c.in(self), dim, keepdim, dtype));
}

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  NEURON_BOXED_ONLY("aten::mm", "", a, b);
  NEURON_OP_INFO("aten::mm");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  if (a.dim() > 0) c.set_matmul_k(a.size(-1));
  return c.out(at::cpu::mm(c.in(a), c.in(b)));
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) {
  NEURON_BOXED_ONLY("aten::bmm", "", a, b);
  NEURON_OP_INFO("aten::bmm");
  const BorrowedArgs args(a, b);
  DirectCall c(info, {&a, &b}, args.values());
  if (a.dim() > 0) c.set_matmul_k(a.size(-1));
  return c.out(at::cpu::bmm(c.in(a), c.in(b)));
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& m1, const at::Tensor& m2,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  NEURON_BOXED_ONLY("aten::addmm", "", self, m1, m2, beta, alpha);
  NEURON_OP_INFO("aten::addmm");
  const BorrowedArgs args(self, m1, m2, beta, alpha);
  DirectCall c(info, {&self, &m1, &m2}, args.values());
  if (m1.dim() > 0) c.set_matmul_k(m1.size(-1));
  return c.out(at::cpu::addmm(c.in(self), c.in(m1), c.in(m2), beta, alpha));
}

at::Tensor index_tensor(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  NEURON_BOXED_ONLY("aten::index", "Tensor", self, indices);
  NEURON_OP_INFO("aten::index.Tensor");
  const BorrowedArgs args(self, indices);
  DirectCall c(info, {&self}, args.values());
  c10::List<std::optional<at::Tensor>> host_indices;
  host_indices.reserve(indices.size());
  for (const std::optional<at::Tensor>& i : indices) {
    if (i.has_value() && i->defined()) {
      if (i->device().type() == kNeuron && i->device() != self.device()) {
        device_mismatch(info.name, self.device(), i->device());
      }
      host_indices.push_back(c.in(*i));
    } else {
      host_indices.push_back(std::nullopt);
    }
  }
  return c.out(at::cpu::index(c.in(self), host_indices));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
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
