#include "aten/OpRegistry.h"

#include <deque>
#include <mutex>
#include <unordered_map>

#include "runtime/NeuronRuntime.h"

namespace torch_neuron {
namespace {

std::mutex g_mutex;
std::deque<OpInfo> g_infos;  // stable addresses
std::unordered_map<std::string, OpInfo*> g_by_name;
thread_local std::unordered_map<const void*, OpInfo*> t_by_schema;

// The cost class (matmul, reduction, elementwise) is op_table.yaml's, registered from Python
// (set_cost_class); from the schema come views, out= arguments and the matrix operand.
void classify(OpInfo& info, const c10::FunctionSchema* schema) {
  const std::string base = info.name.substr(0, info.name.find('.'));
  // Index operands may live on the host (as CUDA allows), _foreach_copy_ copies between devices
  // entry by entry, as copy_ does, and _foreach_addcmul/_addcdiv take a host tensor of scalars.
  info.accepts_cpu_tensors = base.find("index") != std::string::npos || base == "aten::_foreach_copy_" ||
                             base.rfind("aten::_foreach_addc", 0) == 0;
  if (schema) {
    const auto& rets = schema->returns();
    bool all_alias = !rets.empty();
    for (const auto& r : rets) {
      const auto* ai = r.alias_info();
      if (!ai || ai->isWrite()) all_alias = false;
    }
    const auto& args = schema->arguments();
    for (size_t i = 0; i < args.size(); ++i) {
      // The [.., M, K] operand of addmm-style ops follows the added term.
      const std::string& n = args[i].name();
      if (n == "mat1" || n == "batch1" || n == "mat") info.matrix_arg = static_cast<int>(i);
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

void for_each_op_info(const std::function<void(OpInfo&)>& fn) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& info : g_infos) fn(info);
}

}  // namespace torch_neuron
