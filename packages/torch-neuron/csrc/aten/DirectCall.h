// One unboxed host kernel call: the operand checks, the native decision, the host
// scope and the accounting of a hand-written kernel that runs ATen's CPU kernel over
// aliases of device memory (DirectKernels.cpp, ScaledDotProductAttention.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <algorithm>
#include <optional>

#include "aten/Accounting.h"
#include "aten/CostInputs.h"
#include "aten/HostFallback.h"
#include "aten/HostScope.h"
#include "aten/NativeDecision.h"
#include "aten/OpRegistry.h"
#include "aten/ShapeOnly.h"

namespace torch_neuron {


class DirectCall {
 public:
  // `args`: the call's arguments in schema order, for the native decision's attribute checks.
  DirectCall(OpInfo& info, std::initializer_list<const at::Tensor*> tensors,
             c10::ArrayRef<c10::IValue> args = {})
      : info_(info) {
    for (const at::Tensor* t : tensors) {
      if (!t->defined()) continue;
      if (t->device().type() == c10::DeviceType::PrivateUse1) {
        if (device_ < 0) {
          device_ = t->device().index();
          dtype_ = t->scalar_type();
        } else {
          if (t->device().index() != device_) {
            device_mismatch(info_.name, c10::Device(c10::DeviceType::PrivateUse1, device_), t->device());
          }
        }
      } else if (t->device().is_cpu() && t->dim() > 0 && !info_.accepts_cpu_tensors) {
        cpu_tensor_ = true;
      }
    }
    TORCH_INTERNAL_ASSERT(device_ >= 0, info_.name, ": no neuron tensor argument");
    if (cpu_tensor_) {
      device_mismatch(info_.name, c10::Device(c10::DeviceType::PrivateUse1, device_),
                      c10::Device(c10::DeviceType::CPU));
    }
    if (!info_.native_entry.empty() && !values_only()) decide_native(info_, dtype_, args, cost_);
    if (!cost_.native) on_fallback(info_, dtype_);
    check_launch(info_, device_);
    if (C10_UNLIKELY(shape_only::active())) {
      for (const at::Tensor* t : tensors) valueless_ = valueless_ || valueless::contains(*t);
    }
    if (C10_UNLIKELY(valueless_)) {
      meta_.emplace(device_);
    } else {
      scope_.emplace(device_);
    }
  }

  // The kernel's form of operand `t`: its host alias, or its meta form when the call runs
  // without values (valueless()).
  at::Tensor in(const at::Tensor& t) {
    if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1) cost_.bytes_in += nbytes(t);
    return C10_UNLIKELY(valueless_) ? meta_->alias(t) : scope_->alias(t);
  }
  // Shape-only execution with an operand that has no values: in() gives meta tensors, and the
  // kernel computes its results' shapes through the dispatcher (ShapeOnly.h).
  bool valueless() const { return valueless_; }

  void set_matmul_k(int64_t k) { matmul_k_ = double(k); }
  void set_flops(double flops) { flops_ = flops; }
  bool native() const { return cost_.native; }

  // A result of a kernel with several outputs; `finish` accounts the call once.
  at::Tensor result(const at::Tensor& host) {
    at::Tensor r = map(host);
    if (r.defined()) bytes_out_ += nbytes(r);
    return r;
  }
  void finish(const at::Tensor& primary) {
    account_result(primary);
  }

  at::Tensor out(const at::Tensor& host) {
    at::Tensor r = map(host);
    account_result(r);
    return r;
  }

  void inplace(const at::Tensor& self) {
    if (C10_UNLIKELY(valueless_)) {
      valueless::mark(self);
    } else {
      scope_->sync_mutated(self);
    }
    account_result(self);
  }

 private:
  at::Tensor map(const at::Tensor& r) { return C10_UNLIKELY(valueless_) ? meta_->result(r) : scope_->result(r); }

  void account_result(const at::Tensor& r) {
    cost_.bytes_out = bytes_out_ > 0 ? bytes_out_ : nbytes(r);
    cost_.flops = flops_;
    cost_.out_numel = double(r.numel());
    cost_.contraction = matmul_k_;
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
  bool valueless_ = false;
  std::optional<HostScope> scope_;
  std::optional<shape_only::MetaScope> meta_;
};

#define NEURON_OP_INFO(NAME)                 \
  static OpInfo& info = op_info_by_name(NAME)

// Device numerics (rare, and dominated by the kernel's simulation) and shape-only execution
// take the boxed path, whose executor sees every argument and result.
inline bool boxed_only() { return native_executor() != nullptr || shape_only::active(); }
template <typename... Args>
inline at::Tensor boxed_host_call(const char* name, const char* overload, Args&&... args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack;
  torch::jit::push(stack, std::forward<Args>(args)...);
  host_fallback(op, &stack);
  return stack.back().toTensor();
}

}  // namespace torch_neuron
