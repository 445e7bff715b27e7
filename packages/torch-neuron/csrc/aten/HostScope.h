// Host forms of neuron tensors for kernels that compute on the host.
//
// Inside a scope, alias(t) is a CPU tensor over the host alias of t's device
// memory (zero-copy), CPU allocations made on this thread are served from the
// device's memory (runtime/HostAllocationRedirect.h), and result(h) maps a host
// tensor back: an alias returns its original tensor, a view of an alias becomes
// a view of the device storage, and fresh memory is adopted by the device.
// Only results the kernel placed in foreign host memory are copied.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "runtime/HostAllocationRedirect.h"

namespace torch_neuron {

// A CPU tensor over `t`'s device bytes (same sizes, strides, offset, conj/neg bits; no copy),
// valid while `t`'s storage keeps its memory; `t` itself when it is not a neuron tensor. For
// Python code that computes a neuron op's values with CPU ops (the compile backend's fused chains).
at::Tensor host_alias_of(const at::Tensor& t);

class HostScope {
 public:
  static constexpr c10::DeviceType kDeviceType = c10::DeviceType::CPU;
  explicit HostScope(c10::DeviceIndex device);
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
  // Whether an aliased tensor held no values (shape-only execution): the kernel's fresh
  // results then hold none either.
  bool read_valueless() const { return read_valueless_; }

  // Sparse (COO, compressed) and quantized tensors: host forms over aliases of their parts,
  // and device forms of host results (HostLayouts.cpp).
  static bool has_layout_parts(const at::Tensor& t) { return t.layout() != c10::kStrided || t.is_quantized(); }

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
  struct LayoutPair {
    c10::TensorImpl* device;
    at::Tensor host;
    const void* host_quantizer;  // quantized: the quantizer the host form was given
  };
  at::Tensor alias_layout(const at::Tensor& t);
  at::Tensor result_layout(const at::Tensor& host);
  void sync_layout(LayoutPair& lp);
  c10::Storage host_storage_for(const c10::Storage& device_storage);
  c10::StorageImpl* device_storage_of(const c10::Storage& host_storage);
  void sync_storage(StoragePair& p);
  void sync_pair(TensorPair& tp);

  c10::DeviceIndex device_;
  bool read_valueless_ = false;
  ExecutionDeviceScope exec_;
  c10::SmallVector<StoragePair, 6> storages_;
  c10::SmallVector<TensorPair, 6> tensors_;
  c10::SmallVector<LayoutPair, 2> layouts_;  // sparse and quantized arguments
};

}  // namespace torch_neuron
