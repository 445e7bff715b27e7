#include "aten/OpAccounting.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStream.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace torch_neuron {
namespace {

std::atomic<bool> g_strict{false};
std::atomic<FallbackWarn> g_warn_mode{FallbackWarn::Once};
std::atomic<bool> g_warned_once{false};     // Once: the warning was shown
std::atomic<bool> g_reporting_once{false};  // Once: a thread is deciding it
std::atomic<FallbackReporter> g_reporter{nullptr};
thread_local bool t_reporting = false;      // ops run by the reporter do not report

std::mutex g_mutex;
std::deque<OpInfo> g_infos;  // stable addresses
std::unordered_map<std::string, OpInfo*> g_by_name;
std::unordered_map<const void*, OpInfo*> g_by_schema;
thread_local std::unordered_map<const void*, OpInfo*> t_by_schema;

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::atomic<NativeEstimator> g_estimator{nullptr};
std::mutex g_native_mutex;
std::unordered_map<std::string, double> g_native_cache;  // signature -> ns (<0: not covered)
// Each thread keeps the decisions it used, so a hit takes no lock; a new estimator bumps
// the generation, which empties every thread's copy at its next decision.
std::atomic<uint64_t> g_native_generation{1};
struct LocalDecisions {
  uint64_t generation = 0;
  std::unordered_map<std::string, double> ns;
  std::string key;  // reused buffer: building a key allocates nothing once warm
};
thread_local LocalDecisions t_decisions;

void append_raw(std::string& key, char tag, const void* p, size_t n) {
  key += tag;
  key.append(static_cast<const char*>(p), n);
}

void append_tensor(std::string& key, const at::Tensor& t) {
  key += 'T';
  if (!t.defined()) {
    key += 'u';
    return;
  }
  // Shapes of device operands are in the signature already; a host tensor (a wrapped
  // number) is identified by its rank.
  key += static_cast<char>(t.scalar_type());
  if (t.device().type() != c10::DeviceType::PrivateUse1) {
    key += 'h';
    key += static_cast<char>(t.dim());
  }
}

// Attribute values and argument dtypes: a decision may depend on them (alpha, dim, eps, ...).
void append_value(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) {
    append_tensor(key, v.toTensor());
  } else if (v.isTensorList()) {
    key += '[';
    for (const at::Tensor& t : v.toTensorList()) append_tensor(key, t);
    key += ']';
  } else if (v.isList()) {
    key += '[';
    for (const c10::IValue& e : v.toListRef()) append_value(key, e);
    key += ']';
  } else if (v.isDouble()) {
    // Decisions only test numbers against 0 and 1 (alpha, beta, dropout_p, label_smoothing);
    // keying on other values (a scheduled lr, eps) would make every call a new signature.
    const double d = v.toDouble();
    key += d == 0.0 ? 'z' : (d == 1.0 ? 'o' : 'd');
  } else if (v.isInt()) {
    const int64_t i = v.toInt();
    append_raw(key, 'i', &i, sizeof i);
  } else if (v.isBool()) {
    key += v.toBool() ? 'B' : 'b';
  } else if (v.isNone()) {
    key += 'N';
  } else if (v.isString()) {
    key += 's';
    key += v.toStringRef();
    key += '\0';
  } else if (v.isSymInt()) {
    const auto i = v.toSymInt().maybe_as_int();
    const int64_t x = i ? *i : INT64_MIN;
    append_raw(key, 'S', &x, sizeof x);
  } else if (v.isComplexDouble()) {
    const c10::complex<double> c = v.toComplexDouble();
    append_raw(key, 'c', &c, sizeof c);
  } else {
    key += '?';
    key += v.tagKind();
  }
}

// Operands on the device contribute their dtype and shape; out= tensors (results) and
// host tensors their dtype. Returns false for an empty operand (no kernel covers it).
bool append_operand(std::string& key, const at::Tensor& t, bool is_out) {
  if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || is_out) {
    append_tensor(key, t);
    return true;
  }
  if (t.numel() == 0) return false;
  key += 'D';
  key += static_cast<char>(t.scalar_type());
  const auto sizes = t.sizes();
  key += static_cast<char>(sizes.size());
  key.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
  return true;
}

// The decision cache key of a call: op, dtype, operand shapes and dtypes, attribute values.
bool build_signature(std::string& key, const OpInfo& info, c10::ScalarType dtype,
                     c10::ArrayRef<c10::IValue> args) {
  key.clear();
  const OpInfo* id = &info;
  append_raw(key, 'O', &id, sizeof id);
  key += static_cast<char>(dtype);
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    const bool is_out = i < 64 && ((info.out_args >> i) & 1);
    if (v.isTensor()) {
      if (!append_operand(key, v.toTensor(), is_out)) return false;
    } else if (v.isTensorList()) {
      key += '[';
      for (const at::Tensor& t : v.toTensorList()) {
        if (!append_operand(key, t, is_out)) return false;
      }
      key += ']';
    } else if (v.isList()) {
      key += '[';
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) {
          if (!append_operand(key, e.toTensor(), is_out)) return false;
        } else {
          append_value(key, e);
        }
      }
      key += ']';
    } else {
      append_value(key, v);
    }
  }
  return true;
}

void classify(OpInfo& info, const c10::FunctionSchema* schema) {
  const std::string base = info.name.substr(0, info.name.find('.'));
  static const char* kMatmul[] = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm",
                                  "aten::addbmm", "aten::mv", "aten::addmv", "aten::dot",
                                  "aten::vdot", "aten::_addmm_activation", "aten::matmul",
                                  "aten::linear", "aten::_int_mm"};
  for (const char* m : kMatmul) {
    if (base == m) {
      info.cls = OpClass::Matmul;
      info.matrix_arg = (base == "aten::addmm" || base == "aten::baddbmm" || base == "aten::addbmm" ||
                         base == "aten::addmv" || base == "aten::_addmm_activation")
                            ? 1
                            : 0;
    }
  }
  if (base.find("convolution") != std::string::npos || starts_with(base, "aten::conv")) {
    info.cls = OpClass::Convolution;
  }
  static const char* kReductions[] = {"sum", "mean", "max", "min", "amax", "amin", "prod",
                                      "norm", "var", "std", "argmax", "argmin", "logsumexp",
                                      "softmax", "_softmax", "_log_softmax", "cumsum", "all", "any"};
  for (const char* r : kReductions) {
    if (base == std::string("aten::") + r) info.cls = OpClass::Reduction;
  }
  info.accepts_cpu_tensors = base.find("index") != std::string::npos;
  if (schema) {
    const auto& rets = schema->returns();
    bool all_alias = !rets.empty();
    for (const auto& r : rets) {
      const auto* ai = r.alias_info();
      if (!ai || ai->isWrite()) all_alias = false;
    }
    const auto& args = schema->arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      const bool writes = args[i].alias_info() && args[i].alias_info()->isWrite();
      if (writes) all_alias = false;
      if (writes && args[i].kwarg_only() && i < 64) info.out_args |= uint64_t{1} << i;
    }
    if (all_alias) {
      info.is_view = true;
      info.cls = OpClass::View;
    }
  }
}

OpInfo& make_info(const std::string& name, const c10::FunctionSchema* schema) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_by_name.find(name);
  if (it != g_by_name.end()) return *it->second;
  g_infos.emplace_back();
  OpInfo& info = g_infos.back();
  info.name = name;
  nsimRegisterName(name.c_str(), &info.name_id);
  classify(info, schema);
  g_by_name[name] = &info;
  return info;
}

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

}  // namespace

OpInfo& op_info(const c10::OperatorHandle& op) {
  const void* key = &op.schema();
  auto it = t_by_schema.find(key);
  if (C10_LIKELY(it != t_by_schema.end())) return *it->second;
  OpInfo* info = &make_info(full_name(op.operator_name()), &op.schema());
  t_by_schema.emplace(key, info);
  return *info;
}

OpInfo& op_info_by_name(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_by_name.find(name);
    if (it != g_by_name.end()) return *it->second;
  }
  auto op = c10::Dispatcher::singleton().findOp(
      c10::OperatorName(name.substr(0, name.find('.')),
                        name.find('.') == std::string::npos ? "" : name.substr(name.find('.') + 1)));
  return make_info(name, op ? &op->schema() : nullptr);
}

void set_native_estimator(NativeEstimator fn) {
  g_estimator.store(fn);
  // A new estimator may decide differently (e.g. a different device profile).
  std::lock_guard<std::mutex> lock(g_native_mutex);
  g_native_cache.clear();
  g_native_generation.fetch_add(1);
}

void register_native(const std::string& executed_op, const std::string& entry,
                     c10::ScalarType dtype) {
  OpInfo& info = op_info_by_name(executed_op);
  std::lock_guard<std::mutex> lock(g_native_mutex);
  info.native_entry = entry;
  info.native_dtype[static_cast<size_t>(dtype)] = true;
}

void decide_native(OpInfo& info, c10::ScalarType dtype, c10::ArrayRef<c10::IValue> args,
                   CostInputs& cost) {
  cost.native = false;
  const size_t t = static_cast<size_t>(dtype);
  NativeEstimator est = g_estimator.load(std::memory_order_relaxed);
  if (!est || t >= info.native_dtype.size() || !info.native_dtype[t]) return;
  LocalDecisions& local = t_decisions;
  // Tile kernels cover non-empty tensors (0-dim operands are judged by the estimator:
  // _fused_adamw_'s step counters are 0-dim, yet not kernel operands).
  if (!build_signature(local.key, info, dtype, args)) return;
  const uint64_t generation = g_native_generation.load(std::memory_order_relaxed);
  if (local.generation != generation) {
    local.ns.clear();
    local.generation = generation;
  }
  double ns;
  auto hit = local.ns.find(local.key);
  if (C10_LIKELY(hit != local.ns.end())) {
    ns = hit->second;
  } else {
    std::string key = local.key;  // the estimator may run ops, which reuse the buffer
    bool found = false;
    {
      std::lock_guard<std::mutex> lock(g_native_mutex);
      auto it = g_native_cache.find(key);
      if (it != g_native_cache.end()) {
        ns = it->second;
        found = true;
      }
    }
    if (!found) {
      ns = est(info, dtype, args);
      std::lock_guard<std::mutex> lock(g_native_mutex);
      g_native_cache.emplace(key, ns);
    }
    t_decisions.ns.emplace(std::move(key), ns);
  }
  cost.native = ns >= 0;
  cost.native_ns = ns;
}

std::atomic<NativeExecutor> g_native_executor{nullptr};

void set_native_executor(NativeExecutor fn) { g_native_executor.store(fn); }

std::vector<c10::IValue> native_inputs(const c10::FunctionSchema& schema,
                                       c10::ArrayRef<c10::IValue> args) {
  std::vector<c10::IValue> out(args.begin(), args.end());
  bool writes = false;
  for (const auto& a : schema.arguments()) {
    if (a.alias_info() && a.alias_info()->isWrite()) writes = true;
  }
  if (!writes) return out;
  // The CPU kernel is about to overwrite some argument, possibly one that is also read
  // (add_(self, ...), out= aliasing an input): the kernel must see the values before.
  auto copy = [](const at::Tensor& t) { return t.defined() ? t.clone(at::MemoryFormat::Contiguous) : t; };
  for (c10::IValue& v : out) {
    if (v.isTensor()) {
      v = copy(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> copies;
      copies.reserve(v.toTensorList().size());
      for (const at::Tensor& t : v.toTensorList()) copies.push_back(copy(t));
      v = std::move(copies);
    }
  }
  return out;
}

double modelled_duration_ns(c10::DeviceIndex device, OpClass cls, const CostInputs& in,
                            bool fallback) {
  if (cls == OpClass::View) return 0.0;
  const nsimDeviceProperties& p = device_properties(device);
  double peak = p.vector_flops_fp32;
  if (cls == OpClass::Matmul || cls == OpClass::Convolution) {
    peak = in.low_precision ? p.peak_flops_bf16 : p.peak_flops_fp32;
  }
  const double bytes = in.bytes_in + in.bytes_out;
  const double compute_ns = peak > 0 ? in.flops / peak * 1e9 : 0.0;
  const double memory_ns = p.hbm_bandwidth > 0 ? bytes / p.hbm_bandwidth * 1e9 : 0.0;
  double ns = p.launch_overhead_ns + std::max(compute_ns, memory_ns);
  if (fallback && p.host_link_bandwidth > 0) {
    ns += bytes / p.host_link_bandwidth * 1e9 + 2 * p.dma_fixed_overhead_ns;
  }
  return ns;
}

std::thread::id g_main_thread;
std::atomic<bool> g_off_main{false};

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

void account(OpInfo& info, c10::DeviceIndex device, c10::ScalarType dtype, bool native,
             const CostInputs& in) {
  native = native || in.native;
  count(info, dtype, native);
  if (info.is_view) return;
  // A native kernel's time is its simulated engine schedule (plus the launch
  // overhead of the profile); anything else gets the roofline estimate.
  const double ns = in.native ? device_properties(device).launch_overhead_ns + in.native_ns
                              : modelled_duration_ns(device, info.cls, in, !native);
  NEURON_CHECK(nsimLaunch(current_queue(device), info.name_id,
                          native ? NSIM_LAUNCH_KERNEL : NSIM_LAUNCH_FALLBACK, ns, nullptr, nullptr));
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
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& info : g_infos) {
    for (size_t t = 0; t < OpInfo::kNumTypes; ++t) {
      const auto n = info.native[t].load();
      const auto f = info.fallback[t].load();
      if (n == 0 && f == 0) continue;
      const char* dt = t < static_cast<size_t>(c10::ScalarType::NumOptions)
                           ? c10::toString(static_cast<c10::ScalarType>(t))
                           : "none";
      out.push_back(OpCount{info.name, dt, n, f});
    }
  }
  return out;
}

void clear_op_counts() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& info : g_infos) {
    for (auto& a : info.native) a.store(0);
    for (auto& a : info.fallback) a.store(0);
  }
}

}  // namespace torch_neuron
