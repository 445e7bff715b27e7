#include "aten/HostFallback.h"

#include <torch/library.h>

#include "aten/Accounting.h"
#include "aten/CostInputs.h"
#include "aten/HostScope.h"
#include "aten/NativeDecision.h"
#include "aten/OpRegistry.h"
#include "aten/ShapeOnly.h"
#include "runtime/NeuronRuntime.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

c10::ScalarType first_dtype(c10::ScalarType cur, const at::Tensor& t) {
  return cur == c10::ScalarType::Undefined ? t.scalar_type() : cur;
}

}  // namespace

void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  host_fallback_as(op, stack, c10::DispatchKey::CPU);
}

void host_fallback_as(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t nargs = args.size();
  const size_t first = stack->size() - nargs;
  OpInfo& info = op_info(op);

  // Pass 1: the execution device, dtype and device consistency.
  c10::DeviceIndex device = -1;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  const at::Tensor* cpu_tensor = nullptr;
  const at::Tensor* cpu_out = nullptr;
  const bool maybe_native = !info.native_entry.empty();
  bool is_out_arg = false;  // out= tensors are results, not operands of the kernel
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == kNeuron) {
      if (device < 0) {
        device = t.device().index();
      } else if (t.device().index() != device) {
        device_mismatch(info.name, c10::Device(kNeuron, device), t.device());
      }
      dtype = first_dtype(dtype, t);
    } else if (t.device().is_cpu() && is_out_arg && !cpu_out) {
      cpu_out = &t;
    } else if (t.device().is_cpu() && t.dim() > 0 && !cpu_tensor) {
      cpu_tensor = &t;
    }
  };
  c10::DeviceIndex device_arg = -1;
  for (size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    const auto* ai = args[i - first].alias_info();
    is_out_arg = ai && ai->isWrite() && args[i - first].kwarg_only();
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) visit(e.toTensor());
      }
    } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
      device_arg = v.toDevice().has_index() ? v.toDevice().index() : current_device();
    }
  }
  if (device < 0) device = device_arg;
  if (device < 0) {
    // No neuron tensor or device: the op reached the backend through a neuron
    // generator alone; the CPU kernel reports the mismatch as it would for CUDA.
    op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);
    return;
  }
  // CUDA's structured kernels say the first sentence, its other out= kernels the second.
  TORCH_CHECK(!cpu_out, "Expected out tensor to have device ", c10::Device(kNeuron, device),
              ", but got cpu instead: out= must be on the same device as the inputs (when running ", info.name,
              " on neuron)");
  if (cpu_tensor && !info.accepts_cpu_tensors && !info.is_view) {
    device_mismatch(info.name, c10::Device(kNeuron, device), c10::Device(c10::DeviceType::CPU));
  }
  check_device_index(device);
  CostInputs cost;
  if (maybe_native && !values_only()) {
    decide_native(info, dtype, c10::ArrayRef<c10::IValue>(stack->data() + first, nargs), cost);
  }
  if (!info.is_view && !cost.native) on_fallback(info, dtype);
  if (!info.is_view) check_launch(info, device);

  if (C10_UNLIKELY(shape_only::active()) && !info.is_view &&
      shape_only::run_boxed(op, stack, info, device, dtype, cost)) {
    return;
  }
  // Pass 2: replace arguments by their host forms. The replaced device arguments stay
  // owned here (moved, so without reference-count traffic): the scope borrows them.
  c10::SmallVector<c10::IValue, 8> originals;
  HostScope scope(device);
  replace_arguments(scope, info, schema, stack, nargs, cost, originals);

  // Device numerics: the tile kernel recomputes a native call's values (see NativeDecision.h).
  const NativeExecutor numerics = cost.native ? native_executor() : nullptr;
  std::vector<c10::IValue> numerics_args, numerics_inputs;
  if (C10_UNLIKELY(numerics != nullptr)) {
    numerics_args.assign(stack->begin() + first, stack->end());
    numerics_inputs = native_inputs(schema, numerics_args);
  }

  op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);

  // Arguments the kernel mutated may have been resized or re-pointed.
  scope.sync_all();
  const size_t nret = schema.returns().size();
  const size_t rfirst = stack->size() - nret;
  if (C10_UNLIKELY(numerics != nullptr)) {
    numerics(info, dtype, numerics_inputs, numerics_args,
             c10::ArrayRef<c10::IValue>(stack->data() + rfirst, nret));
  }
  replace_results(scope, stack, nret, cost);
  if (info.is_view) return;
  account(info, device, dtype, /*native=*/false, cost);
}

size_t register_functional_host_kernels() {
  static size_t count = [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                          __FILE__, __LINE__);
    size_t n = 0;
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
      // Foreach ops: one host execution (one launch) for the whole tensor list, as a
      // fused multi-tensor kernel would be, instead of one op per tensor.
      const bool foreach = name.name.rfind("aten::_foreach_", 0) == 0 &&
                           op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
      const bool structured_functional =
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
          op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
      // Ops with both a CPU kernel and a composite one for other backends (native_layer_norm
      // decomposes into batch_norm, native_group_norm, addr, ...): run CPU's kernel.
      const bool cpu_over_composite =
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
          op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
      if (!foreach && !structured_functional && !cpu_over_composite) continue;
      std::string short_name = name.name.substr(6);
      if (!name.overload_name.empty()) short_name += "." + name.overload_name;
      lib->impl(short_name.c_str(), torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
      ++n;
    }
    return n;
  }();
  return count;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // mode.values has only a CompositeExplicitAutograd kernel (at::native::mode_out), which
  // refuses any device but CPU/CUDA/XPU before computing, so the functional mode worked on
  // neuron and mode(..., out=) did not. Host execution runs that kernel on the host aliases
  // (the CPU mode kernel, with out= resizing written back), as for other out= ops.
  m.impl("mode.values", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
  // conj_physical_ likewise: its CompositeExplicitAutograd kernel calls conj_physical_stub
  // for the tensor's device type, which has no neuron entry (an internal assert).
  m.impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
}

}  // namespace torch_neuron
