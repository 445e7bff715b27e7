// Redirection of CPU allocations into device memory during host execution.
//
// While a thread has an execution device, every CPU allocation it makes (a host
// kernel's outputs and scratch) is served from that device's memory and handed
// out as its host alias, so the result can become a neuron tensor without a copy.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace torch_neuron {

// Replaces the process CPU allocator with the interposer (once; later calls do nothing).
void install_host_allocation_redirect();

// This thread's execution device, -1 outside host execution.
c10::DeviceIndex execution_device();
// Sets this thread's execution device (-1: none) and returns the previous one, for callers
// that cannot hold an ExecutionDeviceScope (Python).
c10::DeviceIndex exchange_execution_device(c10::DeviceIndex device);

// Sets this thread's execution device for the scope's lifetime; scopes nest.
class ExecutionDeviceScope {
 public:
  explicit ExecutionDeviceScope(c10::DeviceIndex device);
  ~ExecutionDeviceScope();
  ExecutionDeviceScope(const ExecutionDeviceScope&) = delete;
  ExecutionDeviceScope& operator=(const ExecutionDeviceScope&) = delete;

 private:
  c10::DeviceIndex prev_;
};

// The allocator of host storages over device memory: data == context == host alias.
c10::Allocator* host_alias_allocator();
// Whether `p` is a redirected allocation (device memory owned through its host alias).
bool is_redirected(const c10::DataPtr& p);

}  // namespace torch_neuron
