// Shape-only execution: every op on `neuron` is decided and costed as when it executes, but
// computes no values unless its values are cheap and may decide the program's control flow.
//
// Which results carry values (runtime/Valueless.h holds the storages that do not):
// - host-to-device copies and factory ops (no neuron operand) compute as in an executed run;
// - an op whose neuron operands all carry values and whose results take at most
//   kValuedBytes computes as in an executed run; with valueless operands of at most 64 MiB in
//   all it computes too, reading them as the zeros they read as, so flags derived from them
//   (a generation's finished sequences) are what a host read of that data gives;
// - every other op computes its results' shapes with ATen's meta kernels and allocates them
//   from the caching allocator without writing them: they read as zeros (a fill's constant for
//   fill_/zero_). Data-dependent sizes take their upper bound (nonzero, masked_select, boolean
//   indexing, unique); an op with no meta kernel and an operand without values raises.
// Reads of valueless tensors by the host (item(), cpu(), printing) return zeros and are
// reported to the reader set from Python, which attributes them to the user's line.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <atomic>

#include "aten/CostInputs.h"
#include "aten/OpRegistry.h"
#include "runtime/Valueless.h"

namespace torch_neuron::shape_only {

extern std::atomic<bool> g_active;
inline bool active() { return g_active.load(std::memory_order_relaxed); }
void set_active(bool on);

// Results up to this size keep their values when their operands have values.
constexpr double kValuedBytes = 64 * 1024;

// A host read of a valueless tensor ("item", "copy to host"): reported to the Python reader.
using ReadReporter = void (*)(const char* what, const at::Tensor& t);
void set_read_reporter(ReadReporter fn);
void report_read(const char* what, const at::Tensor& t);

// Meta forms of neuron tensors (same sizes, strides, offset and dtype; arguments sharing a
// storage share a meta storage), and neuron forms of meta results.
class MetaScope {
 public:
  static constexpr c10::DeviceType kDeviceType = c10::DeviceType::Meta;
  explicit MetaScope(c10::DeviceIndex device) : device_(device) {}
  MetaScope(const MetaScope&) = delete;
  MetaScope& operator=(const MetaScope&) = delete;
  // The meta form of `t` (t itself when it is not a neuron tensor).
  at::Tensor alias(const at::Tensor& t);
  // The neuron tensor a meta result stands for: an argument (with any resize the meta kernel
  // made), a view of an argument's storage, or fresh device memory holding no values.
  at::Tensor result(const at::Tensor& m);
  c10::DeviceIndex device() const { return device_; }

 private:
  struct StoragePair {
    c10::StorageImpl* meta;
    c10::Storage device;
  };
  struct TensorPair {
    at::Tensor meta;
    at::Tensor device;
  };
  c10::Storage device_storage(const c10::Storage& meta);
  c10::DeviceIndex device_;
  c10::SmallVector<StoragePair, 6> storages_;
  c10::SmallVector<TensorPair, 6> tensors_;
};

// Whether any neuron tensor among the op's operands (out= arguments excluded) has no values.
bool reads_valueless(const OpInfo& info, c10::ArrayRef<c10::IValue> args);

// Boxed host execution of `op` without values, from HostFallback: returns false when the op
// computes its values instead (see above). Otherwise replaces the arguments on `stack` by the
// results, fills `cost`'s byte and element counts as an executed run would, and accounts.
bool run_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpInfo& info,
               c10::DeviceIndex device, c10::ScalarType dtype, CostInputs& cost);

// Allocates a neuron tensor like meta tensor `m` (sizes, strides, offset) without values.
at::Tensor empty_valueless(const at::Tensor& m, c10::DeviceIndex device);

}  // namespace torch_neuron::shape_only
