// Generic host execution of ATen ops on device memory.
//
// An op with no neuron kernel runs its CPU kernel directly on the device bytes:
// each neuron tensor argument is replaced by a CPU tensor over the host alias of
// the same memory (zero-copy), device arguments become CPU, neuron generators
// are replaced by their CPU engines, and while the kernel runs, CPU allocations
// made on this thread are served from the device's memory. Results are mapped
// back: an input alias returns the original tensor, a view of an input becomes
// a view of the device storage, and fresh results adopt their device memory.
// Nothing is copied except results the kernel placed in foreign host memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

namespace torch_neuron {

// Runs the op's CPU kernel on the arguments on the stack (boxed fallback).
void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Building blocks for hand-written kernels that compute on the host.
class HostScope {
 public:
  explicit HostScope(c10::DeviceIndex device);
  ~HostScope();
  HostScope(const HostScope&) = delete;
  HostScope& operator=(const HostScope&) = delete;

  // CPU tensor over the same memory as `t` (t itself if it is not a neuron tensor).
  at::Tensor alias(const at::Tensor& t);
  // Neuron tensor for a result computed on the host inside this scope.
  at::Tensor result(const at::Tensor& host);
  // Writes back storage reallocation and metadata changes the host kernel made
  // to the alias of `device_tensor` (resize_, out= resizing, set_-style re-pointing).
  void sync_mutated(const at::Tensor& device_tensor);
  void sync_all();
  c10::DeviceIndex device() const { return device_; }

 private:
  // Device-side objects are borrowed: the op's arguments outlive the scope, and
  // holding a tensor a Python object also owns would take the GIL on every
  // reference-count transition between one and two.
  struct StoragePair {
    c10::StorageImpl* device;
    c10::Storage created;  // owns `device` when the scope made it (a fresh result)
    c10::Storage host;
    void* host_ptr;
    size_t nbytes;
  };
  struct TensorPair {
    c10::TensorImpl* device;
    at::Tensor host;
  };
  c10::Storage host_storage_for(const c10::Storage& device_storage);
  c10::StorageImpl* device_storage_of(const c10::Storage& host_storage);
  void sync_storage(StoragePair& p);
  void sync_pair(TensorPair& tp);

  c10::DeviceIndex device_;
  c10::DeviceIndex prev_exec_device_;
  c10::SmallVector<StoragePair, 6> storages_;
  c10::SmallVector<TensorPair, 6> tensors_;
};

// Installs the CPU allocator interposer (host execution results land in device memory).
void install_host_allocation_redirect();

// Functional ops that torch implements for other backends by allocating the
// output and calling the out= variant (CompositeExplicitAutogradNonFunctional)
// run their CPU functional kernel instead: same results, strides and warnings
// as CPU, and one dispatch fewer. Foreach ops likewise run as one host
// execution for the whole list. Returns the number of ops registered.
size_t register_functional_host_kernels();

}  // namespace torch_neuron

namespace torch_neuron {
// Strict-mode check, counting and timeline entry for a hand-written kernel that
// computes on the host (conv, fused RNN cells, ...). `flops` may be 0.
void account_host_kernel(const char* op_name, c10::DeviceIndex device, c10::ScalarType dtype,
                         double flops, double bytes_in, double bytes_out);
}  // namespace torch_neuron
