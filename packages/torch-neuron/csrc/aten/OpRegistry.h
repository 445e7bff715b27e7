// The registry of ops run on `neuron`: one OpInfo per op, made on first use,
// classified from its name and schema (matmul, reduction, view, ...), with the
// per-dtype native and fallback counters and the kernel-library entry serving it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <atomic>
#include <functional>
#include <string>

namespace torch_neuron {

enum class OpClass : uint8_t { Elementwise, Reduction, Matmul, Convolution, View, Copy };

struct OpInfo {
  std::string name;      // "aten::add.Tensor"
  uint32_t name_id = 0;  // interned in neuron_sim
  OpClass cls = OpClass::Elementwise;
  bool is_view = false;             // every return aliases an input without writing
  bool accepts_cpu_tensors = false; // CUDA accepts CPU tensors for this op (e.g. indices)
  int matrix_arg = 0;               // index of the [.., M, K] operand (tensor-engine ops)
  uint64_t out_args = 0;            // bit i: argument i is an out= tensor (a result)
  std::atomic<bool> warned{false};
  // Kernel-library entry serving this op ("" if none) and the dtypes it covers.
  std::string native_entry;
  std::array<bool, static_cast<size_t>(c10::ScalarType::NumOptions) + 1> native_dtype{};
  static constexpr size_t kNumTypes = static_cast<size_t>(c10::ScalarType::NumOptions) + 1;
  std::array<std::atomic<uint64_t>, kNumTypes> native{};
  std::array<std::atomic<uint64_t>, kNumTypes> fallback{};
};

OpInfo& op_info(const c10::OperatorHandle& op);
OpInfo& op_info_by_name(const std::string& name);

// Calls fn on every registered op, in registration order, under the registry's lock.
void for_each_op_info(const std::function<void(OpInfo&)>& fn);

}  // namespace torch_neuron
