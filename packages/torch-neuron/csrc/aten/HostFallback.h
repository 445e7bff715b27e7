// Generic host execution of ATen ops on device memory (the boxed fallback).
//
// An op with no neuron kernel runs its CPU kernel directly on the device bytes:
// each neuron tensor argument is replaced by its HostScope alias, device
// arguments become CPU, and results are mapped back to neuron tensors. The
// fallback is registered for every op without a PrivateUse1 kernel.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstddef>

namespace torch_neuron {

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
