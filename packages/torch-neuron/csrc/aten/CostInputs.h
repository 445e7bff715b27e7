// What an execution's modelled device time is computed from (flops, bytes moved,
// operand precision), and the operand checks every kernel makes while gathering
// them: one same-device check and one byte count for the whole ATen layer.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <initializer_list>
#include <string>

namespace torch_neuron {

struct CostInputs {
  bool native = false;
  double native_ns = 0;  // the kernel's simulated latency, when native
  double flops = 0;
  double bytes_in = 0;
  double bytes_out = 0;
  bool low_precision = false;  // bf16/fp16/fp8 operands
};

// Bytes of a tensor's elements (0 for an undefined tensor).
inline double nbytes(const at::Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(t.element_size()) : 0.0;
}

// Operands that run on the tensor engine's low-precision peak.
inline bool is_low_precision(c10::ScalarType dtype) {
  return dtype == c10::ScalarType::BFloat16 || dtype == c10::ScalarType::Half ||
         dtype == c10::ScalarType::Float8_e4m3fn || dtype == c10::ScalarType::Float8_e5m2;
}

// Raises CUDA's error for operands on two devices `a` and `b` of op `op`.
[[noreturn]] void device_mismatch(const std::string& op, const c10::Device& a, const c10::Device& b);

// Every defined tensor of `ts` is on the first one's device, or device_mismatch.
void check_same_device(const std::string& op, std::initializer_list<const at::Tensor*> ts);

}  // namespace torch_neuron
