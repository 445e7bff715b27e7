// Per-op accounting and device-time modelling.
//
// Every execution on `neuron` is counted per op and dtype as native or
// fallback, and placed on the current stream's neuron_sim timeline with a
// modelled duration (see OpCost below).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <atomic>
#include <string>
#include <vector>

namespace torch_neuron {

enum class OpClass : uint8_t { Elementwise, Reduction, Matmul, Convolution, View, Copy };

struct OpInfo {
  std::string name;      // "aten::add.Tensor"
  uint32_t name_id = 0;  // interned in neuron_sim
  OpClass cls = OpClass::Elementwise;
  bool is_view = false;             // every return aliases an input without writing
  bool accepts_cpu_tensors = false; // CUDA accepts CPU tensors for this op (e.g. indices)
  int matrix_arg = 0;               // Matmul: index of the [.., M, K] operand
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

struct CostInputs {
  bool native = false;
  double native_ns = 0;  // the kernel's simulated latency, when native
  double flops = 0;
  double bytes_in = 0;
  double bytes_out = 0;
  bool low_precision = false;  // bf16/fp16/fp8 operands
};

// Modelled device duration in ns of one execution on `device`:
//   launch overhead + max(flops / peak, bytes / HBM bandwidth),
// plus, for a host fallback, the round trip of its operands over the host
// link (bytes / host link bandwidth + one DMA setup per direction). Peak,
// bandwidths and overheads come from the device profile (neuron_sim).
double modelled_duration_ns(c10::DeviceIndex device, OpClass cls, const CostInputs& in,
                            bool fallback);

// Counts the execution and places it on the current stream's timeline.
void account(OpInfo& info, c10::DeviceIndex device, c10::ScalarType dtype, bool native,
             const CostInputs& in);

// ---- native kernels (neuron_kernels' op table) ----
// Estimates the kernel's device time (ns) for a call, or returns a negative value when
// the kernel does not cover it (shapes or attributes such as add's alpha outside the
// adapter's coverage). `args` is the call's whole argument list in schema order (device
// tensors, numbers, lists), so the decision can read attributes. Set by the Python layer.
using NativeEstimator = double (*)(const OpInfo& info, c10::ScalarType dtype,
                                   c10::ArrayRef<c10::IValue> args);
void set_native_estimator(NativeEstimator fn);
void register_native(const std::string& executed_op, const std::string& entry,
                     c10::ScalarType dtype);
// Decides whether this execution runs on a native kernel; fills cost.native / native_ns.
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
  return g_native_executor.load(std::memory_order_relaxed);
}
void set_native_executor(NativeExecutor fn);
// The inputs the executor needs, taken before the CPU kernel runs: the arguments
// themselves, or contiguous copies of their tensors when the op writes to an argument
// (an in-place self or an out= tensor may alias an input).
std::vector<c10::IValue> native_inputs(const c10::FunctionSchema& schema,
                                       c10::ArrayRef<c10::IValue> args);

// Whether any op ran on a thread other than the one that initialised the backend
// (autograd's device workers run backward there).
void set_main_thread();
bool ops_ran_off_main_thread();

// Counts an execution whose timeline entry neuron_sim already made (copies).
void count(OpInfo& info, c10::ScalarType dtype, bool native);

// Policy switches (set from Python, which reads the environment registry).
void set_strict(bool strict);
bool strict();
// Fallback warnings (TORCH_NEURON_FALLBACK_WARN): none, one for the process's first
// fallback, or one for each op's first fallback.
enum class FallbackWarn : int { Off = 0, Once = 1, PerOp = 2 };
void set_fallback_warn(FallbackWarn mode);
FallbackWarn fallback_warn();
// Issues the warning for one fallback; set by the Python layer, which attributes it to
// the user's line. `rejected`: the op has a kernel that did not cover this call. Returns
// false when the fallback does not count as warned (an op run by tensor printing), so the
// next one is still a candidate. Unset, the warning is a TORCH_WARN.
using FallbackReporter = bool (*)(const OpInfo& info, c10::ScalarType dtype, bool rejected,
                                  bool per_op);
void set_fallback_reporter(FallbackReporter fn);
// Raises in strict mode; otherwise warns as the mode says. Once the warning was shown,
// the warning check is one relaxed load (two in the per-op mode), with no Python call.
void on_fallback(OpInfo& info, c10::ScalarType dtype);

struct OpCount {
  std::string op;
  std::string dtype;
  uint64_t native;
  uint64_t fallback;
};
std::vector<OpCount> op_counts();
void clear_op_counts();

}  // namespace torch_neuron
