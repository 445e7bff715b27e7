// What an execution's modelled device time is computed from (flops, bytes moved,
// result and contraction sizes), and the operand checks every kernel makes while gathering
// them: one same-device check and one byte count for the whole ATen layer.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <neuron_sim/neuron_sim.h>

#include <array>
#include <initializer_list>
#include <string>

namespace torch_neuron {

// Filled by the kernels; launch_cost (Accounting.h) turns them into neuron_sim's launch cost.
struct CostInputs {
  bool native = false;
  double native_ns = 0;  // the kernel's simulated schedule latency, when native
  std::array<double, NSIM_ENGINE_COUNT> engine_busy_ns{};  // its per-engine busy time
  double flops = 0;      // 0: derived from the result and contraction sizes
  double bytes_in = 0;
  double bytes_out = 0;
  double out_numel = 0;  // elements of the results
  double contraction = 0;  // tensor-engine ops: reduction length per output element
};

// Bytes of a tensor's elements (0 for an undefined tensor).
inline double nbytes(const at::Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(t.element_size()) : 0.0;
}

// Raises CUDA's error for operands on two devices `a` and `b` of op `op`.
[[noreturn]] void device_mismatch(const std::string& op, const c10::Device& a, const c10::Device& b);

// Every defined tensor of `ts` is on the first one's device, or device_mismatch.
void check_same_device(const std::string& op, std::initializer_list<const at::Tensor*> ts);

}  // namespace torch_neuron
