// Generic host execution of ATen ops on device memory (the boxed fallback).
//
// An op with no neuron kernel runs its CPU kernel directly on the device bytes:
// each neuron tensor argument is replaced by its HostScope alias, device
// arguments become CPU, and results are mapped back to neuron tensors. The
// fallback is registered for every op without a PrivateUse1 kernel.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <cstddef>

#include "aten/CostInputs.h"
#include "aten/OpRegistry.h"

namespace torch_neuron {

inline bool is_neuron_tensor(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

inline bool is_optional_generator(const c10::TypePtr& ty) {
  return ty->kind() == c10::TypeKind::OptionalType &&
         ty->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

// Replaces the neuron tensors among the `nargs` arguments on top of `stack` by their forms in
// `scope` (HostScope: host aliases; shape_only::MetaScope: meta tensors) and neuron devices by
// the scope's device type, keeping the replaced arguments in `originals` (the scope borrows them). Adds the
// operands' bytes and the contraction length of a tensor-engine op to `cost`.
template <class Scope>
void replace_arguments(Scope& scope, const OpInfo& info, const c10::FunctionSchema& schema,
                       torch::jit::Stack* stack, size_t nargs, CostInputs& cost,
                       c10::SmallVector<c10::IValue, 8>& originals) {
  const auto& args = schema.arguments();
  const size_t first = stack->size() - nargs;
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      if (!is_neuron_tensor(v.toTensor())) continue;
      originals.push_back(std::move(v));
      const at::Tensor& t = originals.back().toTensor();
      cost.bytes_in += nbytes(t);
      if (static_cast<int>(i) == info.matrix_arg && t.dim() > 0) cost.contraction = static_cast<double>(t.size(-1));
      v = scope.alias(t);
    } else if (v.isTensorList()) {
      originals.push_back(v);
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        cost.bytes_in += is_neuron_tensor(t) ? nbytes(t) : 0.0;
        out.push_back(scope.alias(t));
      }
      v = std::move(out);
    } else if (v.isList() && args[i].type()->kind() == c10::TypeKind::ListType) {
      bool any = false;
      for (const c10::IValue& e : v.toListRef()) any = any || (e.isTensor() && is_neuron_tensor(e.toTensor()));
      if (!any) continue;
      originals.push_back(v);
      c10::List<std::optional<at::Tensor>> out;
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) {
          cost.bytes_in += is_neuron_tensor(e.toTensor()) ? nbytes(e.toTensor()) : 0.0;
          out.push_back(scope.alias(e.toTensor()));
        } else {
          out.push_back(std::nullopt);
        }
      }
      v = std::move(out);
    } else if (v.isDevice()) {
      if (v.toDevice().type() == c10::DeviceType::PrivateUse1) v = c10::Device(Scope::kDeviceType);
    } else if (v.isGenerator() || (v.isNone() && is_optional_generator(args[i].type()))) {
      // A CPU kernel would draw from a CPU generator: values would not follow the neuron
      // generator's (seed, offset) counters. Every random op has a kernel in RandomKernels.cpp.
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", info.name,
                                  " draws random numbers and has no neuron random kernel");
    }
  }
}

// Maps the `nret` results on top of `stack` back to neuron tensors with `scope`, adding their
// bytes and elements to `cost`.
template <class Scope>
void replace_results(Scope& scope, torch::jit::Stack* stack, size_t nret, CostInputs& cost) {
  const size_t rfirst = stack->size() - nret;
  for (size_t j = rfirst; j < stack->size(); ++j) {
    c10::IValue& v = (*stack)[j];
    if (v.isTensor()) {
      at::Tensor r = scope.result(v.toTensor());
      if (r.defined()) {
        cost.bytes_out += nbytes(r);
        cost.out_numel += static_cast<double>(r.numel());
      }
      v = std::move(r);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        at::Tensor r = scope.result(t);
        cost.bytes_out += nbytes(r);
        cost.out_numel += r.defined() ? static_cast<double>(r.numel()) : 0.0;
        out.push_back(std::move(r));
      }
      v = std::move(out);
    }
  }
}

// Runs the op's CPU kernel on the arguments on the stack.
void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The same for the sparse and quantized keys: runs the kernel of `cpu_key` (SparseCPU,
// SparseCsrCPU, QuantizedCPU) on the arguments' host forms.
void host_fallback_as(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key);

// Functional ops that torch implements for other backends by allocating the
// output and calling the out= variant (CompositeExplicitAutogradNonFunctional)
// run their CPU functional kernel instead: same results, strides and warnings
// as CPU, and one dispatch fewer. Foreach ops likewise run as one host
// execution for the whole list. Returns the number of ops registered.
size_t register_functional_host_kernels();
// The same for the sparse and quantized keys (SparseQuantizedKeys.cpp).
size_t register_layout_host_kernels();

}  // namespace torch_neuron
