// Per-op accounting and device-time modelling.
//
// Every execution on `neuron` is counted per op and dtype as native or fallback,
// and placed on the current stream's neuron_sim timeline with a modelled duration.
// A fallback first passes the policy: an error in strict mode, otherwise the
// fallback warning the mode asks for.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aten/CostInputs.h"
#include "aten/OpRegistry.h"

namespace torch_neuron {

// The one cost-input builder: neuron_sim's launch cost of one execution of `info` with
// operands of `dtype`. A native kernel is costed by its engine schedule; anything else by
// the roofline, plus the host round trip when it runs on the host (`fallback`). The
// durations themselves are neuron_sim's (nsimModelLaunchDuration), which owns the figures.
nsimLaunchCost launch_cost(const OpInfo& info, c10::ScalarType dtype, const CostInputs& in,
                           bool fallback);
// The precision class of operands of `dtype` (selects the engine peak).
nsimDtypeClass dtype_class(c10::ScalarType dtype);

// Counts the execution and places it on the current stream's timeline.
void account(OpInfo& info, c10::DeviceIndex device, c10::ScalarType dtype, bool native,
             const CostInputs& in);

// While set on a thread, neuron ops only compute their values: no native decision, no count,
// no launch, no fallback report, no fault check. A compiled graph's fused kernel runs its
// chain's ATen ops this way and then launches once, as the one kernel it stands for.
bool values_only();
// Sets this thread's mode and returns the previous one.
bool exchange_values_only(bool on);

// Counting and timeline entry for a hand-written kernel that computes on the host
// (conv, fused RNN cells, random ops, ...). `flops` may be 0; `tensor_engine`: the op's
// arithmetic would run on TensorE (convolutions).
void account_host_kernel(const char* op_name, c10::DeviceIndex device, c10::ScalarType dtype,
                         double flops, double bytes_in, double bytes_out, bool tensor_engine = false);

// The host cost class of an op (op_table.yaml's cost_class column, registered from Python
// at install; ops outside the table default to elementwise).
void set_cost_class(const std::string& op, OpClass cls);

// Raises the error the op's launch will raise when a fault is injected for it (its name in
// NEURON_SIM_FAULT_KERNEL, the device's lost launch), before a host kernel writes anything:
// the launch is accounted after the host computes, and an in-place op must not have changed
// its tensor when its launch fails. Nothing armed: one call with two relaxed loads.
void check_launch(const OpInfo& info, c10::DeviceIndex device);

// Counts an execution whose timeline entry neuron_sim already made (copies).
void count(OpInfo& info, c10::ScalarType dtype, bool native);

// Whether any op ran on a thread other than the one that initialised the backend
// (autograd's device workers run backward there).
void set_main_thread();
bool ops_ran_off_main_thread();

// Launches of one compiled graph. While deferral is on for this thread, launches are counted
// as usual but not placed on the timeline: the compile backend places them afterwards, each
// run of native kernels between host fallbacks as one launch (one NEFF) whose duration it
// models from the deferred kernels, or each launch as it would have been. Copies are placed
// at once.
struct DeferredLaunch {
  const OpInfo* info;
  c10::DeviceIndex device;
  nsimQueue queue;
  nsimLaunchCost cost;
  bool native;
};
void begin_deferred_launches();
// Ends deferral for this thread and returns the launches deferred since it began.
std::vector<DeferredLaunch> end_deferred_launches();
// Places a deferred launch on the queue it was issued to.
void place_deferred(const DeferredLaunch& launch);

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
