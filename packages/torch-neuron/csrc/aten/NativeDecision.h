// Whether a call runs on a native kernel (neuron_kernels' op table), and the
// device-numerics executor that recomputes a native call's values.
//
// The Python layer sets the estimator (does the kernel cover this call, and its
// simulated time) and registers the table's entries. Decisions are cached per
// call signature, so the estimator runs once per distinct call.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "aten/Accounting.h"
#include "aten/CostInputs.h"
#include "aten/OpRegistry.h"

namespace torch_neuron {

// Estimates the kernel's device time (ns) for a call, or returns a negative value when
// the kernel does not cover it (shapes or attributes such as add's alpha outside the
// adapter's coverage). `args` is the call's whole argument list in schema order (device
// tensors, numbers, lists), so the decision can read attributes. Set by the Python layer.
// The estimate of a covered call: schedule latency (ns, < 0: not covered) and busy time of
// each engine (nsimEngine order).
struct NativeCost {
  double ns = -1;
  std::array<double, NSIM_ENGINE_COUNT> engine_busy_ns{};
};
using NativeEstimator = NativeCost (*)(const OpInfo& info, c10::ScalarType dtype,
                                       c10::ArrayRef<c10::IValue> args);
void set_native_estimator(NativeEstimator fn);
void register_native(const std::string& executed_op, const std::string& entry,
                     c10::ScalarType dtype);
// Decides whether this execution runs on a native kernel; fills cost.native, native_ns and
// engine_busy_ns.
// Decisions are cached per signature (op, dtype, operand shapes, argument dtypes and
// attribute values), so the estimator runs once per distinct call.
// `args` may borrow the caller's tensors (see BorrowedArgs).
void decide_native(OpInfo& info, c10::ScalarType dtype, c10::ArrayRef<c10::IValue> args,
                   CostInputs& cost);

// A call's arguments as IValues that borrow the caller's tensors instead of sharing
// them: copying a tensor whose only other owner is its Python object would take the
// GIL twice (reference count 1 -> 2 -> 1). Valid while the borrowed tensors live.
class BorrowedArgs {
 public:
  template <typename... T>
  explicit BorrowedArgs(const T&... args) {
    (push(args), ...);
  }
  ~BorrowedArgs() {
    for (size_t i = 0; i < values_.size(); ++i) {
      if (borrowed_[i]) std::move(values_[i]).toTensor().unsafeReleaseTensorImpl();
    }
  }
  BorrowedArgs(const BorrowedArgs&) = delete;
  BorrowedArgs& operator=(const BorrowedArgs&) = delete;
  c10::ArrayRef<c10::IValue> values() const { return values_; }

 private:
  void push(const at::Tensor& t) {
    // reclaim() adopts the pointer without touching the count; the destructor releases
    // it the same way, so the caller's reference is the only one ever counted.
    values_.emplace_back(at::Tensor(
        c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(t.unsafeGetTensorImpl())));
    borrowed_.push_back(true);
  }
  template <typename T>
  void push(const T& v) {
    values_.emplace_back(v);
    borrowed_.push_back(false);
  }
  c10::SmallVector<c10::IValue, 6> values_;
  c10::SmallVector<bool, 6> borrowed_;
};

// ---- device numerics (TORCH_NEURON_DEVICE_NUMERICS) ----
// When set, a native call's values come from its tile kernel: after the CPU kernel has
// produced the outputs (allocation, shapes, strides), the executor runs the kernel on
// `inputs` and overwrites the outputs. `args` are the host forms the CPU kernel received
// (in-place and out= targets), `inputs` the same values before the CPU kernel ran
// (copies for ops that write to an argument), `results` the op's host-form returns.
// Null (the default) turns the mode off; the check is one relaxed load.
using NativeExecutor = void (*)(const OpInfo& info, c10::ScalarType dtype,
                                c10::ArrayRef<c10::IValue> inputs, c10::ArrayRef<c10::IValue> args,
                                c10::ArrayRef<c10::IValue> results);
extern std::atomic<NativeExecutor> g_native_executor;
inline NativeExecutor native_executor() {
  NativeExecutor ex = g_native_executor.load(std::memory_order_relaxed);
  return ex != nullptr && values_only() ? nullptr : ex;
}
// The executor over a hand-written kernel's host operands, which no kernel writes before it
// runs (so they are both its inputs and its args); nothing when the mode is off.
inline void run_numerics(const OpInfo& info, c10::ScalarType dtype, const std::vector<c10::IValue>& args,
                         const std::vector<c10::IValue>& results) {
  if (NativeExecutor ex = native_executor()) ex(info, dtype, args, args, results);
}
void set_native_executor(NativeExecutor fn);
// The inputs the executor needs, taken before the CPU kernel runs: the arguments
// themselves, or contiguous copies of their tensors when the op writes to an argument
// (an in-place self or an out= tensor may alias an input).
std::vector<c10::IValue> native_inputs(const c10::FunctionSchema& schema,
                                       c10::ArrayRef<c10::IValue> args);

}  // namespace torch_neuron
