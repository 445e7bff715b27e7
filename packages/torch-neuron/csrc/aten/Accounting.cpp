#include "aten/Accounting.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStream.h"

namespace torch_neuron {
namespace {

std::atomic<bool> g_strict{false};
std::atomic<FallbackWarn> g_warn_mode{FallbackWarn::Once};
std::atomic<bool> g_warned_once{false};     // Once: the warning was shown
std::atomic<bool> g_reporting_once{false};  // Once: a thread is deciding it
std::atomic<FallbackReporter> g_reporter{nullptr};
thread_local bool t_reporting = false;      // ops run by the reporter do not report
// Native launches deferred by a compiled graph's run on this thread (null: not deferring).
thread_local std::vector<DeferredLaunch>* t_deferred = nullptr;
thread_local bool t_values_only = false;

std::thread::id g_main_thread;
std::atomic<bool> g_off_main{false};

}  // namespace

nsimDtypeClass dtype_class(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Half:
      return NSIM_DTYPE_BF16;
    case c10::ScalarType::Float8_e4m3fn:
    case c10::ScalarType::Float8_e5m2:
    case c10::ScalarType::Float8_e4m3fnuz:
    case c10::ScalarType::Float8_e5m2fnuz:
      return NSIM_DTYPE_FP8;
    case c10::ScalarType::Undefined:
      return NSIM_DTYPE_NONE;
    default:
      return c10::isIntegralType(dtype, /*includeBool=*/true) ? NSIM_DTYPE_INT : NSIM_DTYPE_FP32;
  }
}

nsimLaunchCost launch_cost(const OpInfo& info, c10::ScalarType dtype, const CostInputs& in,
                           bool fallback) {
  nsimLaunchCost c{};
  c.dtype_class = dtype_class(dtype);
  const bool tensor = info.cls == OpClass::Matmul || info.cls == OpClass::Convolution;
  c.compute = tensor ? NSIM_COMPUTE_TENSOR : NSIM_COMPUTE_VECTOR;
  c.bytes_read = in.bytes_in;
  c.bytes_written = in.bytes_out;
  if (in.flops > 0) {
    c.flops = in.flops;
  } else if (tensor) {
    c.flops = 2.0 * in.out_numel * in.contraction;
  } else {
    // One operation per result element, or per input element for reductions.
    const double elem = static_cast<double>(
        c10::elementSize(dtype == c10::ScalarType::Undefined ? c10::ScalarType::Float : dtype));
    c.flops = std::max(in.out_numel, in.bytes_in / std::max(1.0, elem));
  }
  if (in.native) {
    c.model = NSIM_MODEL_KERNEL_SCHEDULE;
    c.duration_ns = in.native_ns;
    for (int e = 0; e < NSIM_ENGINE_COUNT; ++e) c.engine_busy_ns[e] = in.engine_busy_ns[e];
  } else {
    c.model = fallback ? NSIM_MODEL_HOST_ROUND_TRIP : NSIM_MODEL_ROOFLINE;
  }
  return c;
}

void set_cost_class(const std::string& op, OpClass cls) {
  OpInfo& info = op_info_by_name(op);
  if (!info.is_view) info.cls = cls;
}

void set_main_thread() { g_main_thread = std::this_thread::get_id(); }
bool ops_ran_off_main_thread() { return g_off_main.load(); }

void count(OpInfo& info, c10::ScalarType dtype, bool native) {
  if (C10_UNLIKELY(!g_off_main.load(std::memory_order_relaxed)) &&
      std::this_thread::get_id() != g_main_thread) {
    g_off_main.store(true, std::memory_order_relaxed);
  }
  const size_t t = static_cast<size_t>(dtype) < OpInfo::kNumTypes ? static_cast<size_t>(dtype)
                                                                  : OpInfo::kNumTypes - 1;
  (native ? info.native : info.fallback)[t].fetch_add(1, std::memory_order_relaxed);
}

bool values_only() { return t_values_only; }

bool exchange_values_only(bool on) {
  const bool prev = t_values_only;
  t_values_only = on;
  return prev;
}

void account(OpInfo& info, c10::DeviceIndex device, c10::ScalarType dtype, bool native,
             const CostInputs& in) {
  if (C10_UNLIKELY(t_values_only)) return;
  native = native || in.native;
  count(info, dtype, native);
  if (info.is_view) return;
  const nsimLaunchCost cost = launch_cost(info, dtype, in, !native);
  if (C10_UNLIKELY(t_deferred != nullptr)) {
    t_deferred->push_back(DeferredLaunch{&info, device, current_queue(device), cost, native});
    return;
  }
  NEURON_CHECK(nsimLaunchWithCost(current_queue(device), info.name_id,
                                  native ? NSIM_LAUNCH_KERNEL : NSIM_LAUNCH_FALLBACK, &cost, nullptr,
                                  nullptr, nullptr));
}

void begin_deferred_launches() {
  TORCH_CHECK(t_deferred == nullptr, "neuron: a compiled graph's launches are already being deferred on "
              "this thread (a compiled graph ran inside another one)");
  t_deferred = new std::vector<DeferredLaunch>();
}

std::vector<DeferredLaunch> end_deferred_launches() {
  if (t_deferred == nullptr) return {};
  std::vector<DeferredLaunch> out = std::move(*t_deferred);
  delete t_deferred;
  t_deferred = nullptr;
  return out;
}

void place_deferred(const DeferredLaunch& l) {
  NEURON_CHECK(nsimLaunchWithCost(l.queue, l.info->name_id, l.native ? NSIM_LAUNCH_KERNEL : NSIM_LAUNCH_FALLBACK,
                                  &l.cost, nullptr, nullptr, nullptr));
}

void check_launch(const OpInfo& info, c10::DeviceIndex device) {
  if (C10_LIKELY(!nsimLaunchWouldFail(device, info.name_id)) || t_values_only) return;
  // The launch itself consumes the fault and reports it as it always does.
  NEURON_CHECK(nsimLaunch(current_queue(device), info.name_id, NSIM_LAUNCH_FALLBACK, 0.0, nullptr, nullptr));
}

void account_host_kernel(const char* op_name, c10::DeviceIndex device, c10::ScalarType dtype,
                         double flops, double bytes_in, double bytes_out, bool tensor_engine) {
  OpInfo& info = op_info_by_name(op_name);
  if (tensor_engine && info.cls != OpClass::Matmul) info.cls = OpClass::Convolution;
  CostInputs cost;
  cost.flops = flops;
  cost.bytes_in = bytes_in;
  cost.bytes_out = bytes_out;
  account(info, device, dtype, /*native=*/false, cost);
}

void set_strict(bool s) { g_strict.store(s); }
bool strict() { return g_strict.load(std::memory_order_relaxed); }
void set_fallback_warn(FallbackWarn mode) { g_warn_mode.store(mode); }
FallbackWarn fallback_warn() { return g_warn_mode.load(); }
void set_fallback_reporter(FallbackReporter fn) { g_reporter.store(fn); }

namespace {

const char* rejection_reason(const OpInfo& info) {
  // A table op whose kernel rejected this call's arguments says where the reason is.
  return info.native_entry.empty()
             ? ""
             : " for this call (its kernel does not cover the call's shapes, dtypes or "
               "attributes; torch_neuron.native_rejections() says why)";
}

// Sets `warned` unless the reporter declined (a printing op). An exception from the
// reporter (warnings turned into errors) propagates and counts as warned.
void report_fallback(const OpInfo& info, c10::ScalarType dtype, bool per_op,
                     std::atomic<bool>& warned) {
  if (t_reporting) return;
  FallbackReporter fn = g_reporter.load();
  if (!fn) {
    warned.store(true);
    TORCH_WARN("neuron: ", info.name, " (", c10::toString(dtype), ") has no native neuron kernel",
               rejection_reason(info), "; it runs on the host and is counted as a fallback "
               "(torch_neuron.get_fallback_ops()).");
    return;
  }
  t_reporting = true;
  struct Reset {
    ~Reset() { t_reporting = false; }
  } reset;
  bool shown = true;
  try {
    shown = fn(info, dtype, !info.native_entry.empty(), per_op);
  } catch (...) {
    warned.store(true);
    throw;
  }
  if (shown) warned.store(true);
}

}  // namespace

void on_fallback(OpInfo& info, c10::ScalarType dtype) {
  if (C10_UNLIKELY(t_values_only)) return;
  if (C10_UNLIKELY(g_strict.load(std::memory_order_relaxed))) {
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, "neuron: ", info.name, " (", c10::toString(dtype),
        ") has no native neuron kernel", rejection_reason(info), " and would run on the host "
        "(CPU fallback). TORCH_NEURON_STRICT=1 makes fallbacks errors; unset it (or call "
        "torch_neuron.set_strict(False)) to allow host execution.");
  }
  const FallbackWarn mode = g_warn_mode.load(std::memory_order_relaxed);
  if (mode == FallbackWarn::Once) {
    if (C10_LIKELY(g_warned_once.load(std::memory_order_relaxed))) return;
    // One thread decides at a time; a fallback meanwhile on another thread stays silent.
    bool idle = false;
    if (!g_reporting_once.compare_exchange_strong(idle, true)) return;
    struct Release {
      ~Release() { g_reporting_once.store(false); }
    } release;
    report_fallback(info, dtype, /*per_op=*/false, g_warned_once);
  } else if (mode == FallbackWarn::PerOp) {
    if (info.warned.load(std::memory_order_relaxed)) return;
    report_fallback(info, dtype, /*per_op=*/true, info.warned);
  }
}

std::vector<OpCount> op_counts() {
  std::vector<OpCount> out;
  for_each_op_info([&out](OpInfo& info) {
    for (size_t t = 0; t < OpInfo::kNumTypes; ++t) {
      const auto n = info.native[t].load();
      const auto f = info.fallback[t].load();
      if (n == 0 && f == 0) continue;
      const char* dt = t < static_cast<size_t>(c10::ScalarType::NumOptions)
                           ? c10::toString(static_cast<c10::ScalarType>(t))
                           : "none";
      out.push_back(OpCount{info.name, dt, n, f});
    }
  });
  return out;
}

void clear_op_counts() {
  for_each_op_info([](OpInfo& info) {
    for (auto& a : info.native) a.store(0);
    for (auto& a : info.fallback) a.store(0);
  });
}

}  // namespace torch_neuron
