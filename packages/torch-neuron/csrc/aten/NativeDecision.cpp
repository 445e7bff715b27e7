#include "aten/NativeDecision.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace torch_neuron {
namespace {

std::atomic<NativeEstimator> g_estimator{nullptr};
std::mutex g_native_mutex;
std::unordered_map<std::string, NativeCost> g_native_cache;  // signature -> estimate
// Each thread keeps the decisions it used, so a hit takes no lock; a new estimator bumps
// the generation, which empties every thread's copy at its next decision.
std::atomic<uint64_t> g_native_generation{1};
struct LocalDecisions {
  uint64_t generation = 0;
  std::unordered_map<std::string, NativeCost> ns;
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

void append_sizes(std::string& key, c10::IntArrayRef sizes) {
  key += static_cast<char>(sizes.size());
  key.append(reinterpret_cast<const char*>(sizes.data()), sizes.size() * sizeof(int64_t));
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
  append_sizes(key, t.sizes());
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
      // An empty entry of a list (a cat's empty cache) is the binder's to judge: it is keyed by
      // its shape like any entry.
      key += '[';
      for (const at::Tensor& t : v.toTensorList()) {
        if (t.defined() && t.numel() == 0 && !is_out) {
          key += 'E';
          append_tensor(key, t);
          append_sizes(key, t.sizes());
        } else if (!append_operand(key, t, is_out)) {
          return false;
        }
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

}  // namespace

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
  NativeCost ns;
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
  cost.native = ns.ns >= 0;
  cost.native_ns = ns.ns;
  cost.engine_busy_ns = ns.engine_busy_ns;
}

std::atomic<NativeExecutor> g_native_executor{nullptr};

void set_native_executor(NativeExecutor fn) { g_native_executor.store(fn); }

std::vector<c10::IValue> native_inputs(const c10::FunctionSchema& schema,
                                       c10::ArrayRef<c10::IValue> args) {
  std::vector<c10::IValue> out(args.begin(), args.end());
  // native_batch_norm updates running_mean and running_var in place in training mode without
  // declaring it in its schema.
  bool writes = schema.name() == "aten::native_batch_norm";
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

}  // namespace torch_neuron
