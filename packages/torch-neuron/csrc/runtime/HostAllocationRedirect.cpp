#include "runtime/HostAllocationRedirect.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"

namespace torch_neuron {
namespace {

thread_local c10::DeviceIndex t_exec_device = -1;

// Host memory handed to CPU kernels during host execution: the host alias of a
// device block. data == context == alias, so raw_allocate/raw_deallocate work.
void redirect_free(void* host_alias) {
  if (host_alias) raw_free(nsimHostToDeviceUnchecked(host_alias));
}

struct RedirectAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex d = t_exec_device;
    TORCH_INTERNAL_ASSERT(d >= 0, "neuron: device-backed host allocation outside host execution");
    if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    void* h = nsimDeviceToHostUnchecked(raw_alloc(d, n, /*scratch=*/true));
    return c10::DataPtr(h, h, &redirect_free, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &redirect_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};
RedirectAllocator g_redirect;

c10::DeleterFnPtr g_base_raw_deleter = nullptr;

// raw_deallocate of memory from raw_allocate: the pointer says which allocator
// served it (host execution may have redirected the allocation).
void interposed_raw_free(void* p) {
  if (p && nsimHostToDeviceUnchecked(p)) {
    redirect_free(p);
  } else if (g_base_raw_deleter) {
    g_base_raw_deleter(p);
  }
}

// Replaces the process CPU allocator: while a host execution runs on this
// thread, CPU tensors (the kernel's outputs and scratch) come from device memory.
struct InterposingCPUAllocator final : public c10::Allocator {
  c10::Allocator* base = nullptr;
  c10::DataPtr allocate(size_t n) override {
    if (t_exec_device >= 0) return g_redirect.allocate(n);
    return base->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &interposed_raw_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base->copy_data(dest, src, count);
  }
};
InterposingCPUAllocator g_interposer;

}  // namespace

void install_host_allocation_redirect() {
  static bool installed = [] {
    g_interposer.base = c10::GetCPUAllocator();
    g_base_raw_deleter = g_interposer.base->raw_deleter();
    c10::SetCPUAllocator(&g_interposer, /*priority=*/1);
    return true;
  }();
  (void)installed;
}

c10::DeviceIndex execution_device() { return t_exec_device; }

c10::DeviceIndex exchange_execution_device(c10::DeviceIndex device) {
  const c10::DeviceIndex prev = t_exec_device;
  t_exec_device = device;
  return prev;
}

ExecutionDeviceScope::ExecutionDeviceScope(c10::DeviceIndex device) : prev_(t_exec_device) {
  t_exec_device = device;
}

ExecutionDeviceScope::~ExecutionDeviceScope() { t_exec_device = prev_; }

c10::Allocator* host_alias_allocator() { return &g_redirect; }

bool is_redirected(const c10::DataPtr& p) { return p.get_deleter() == &redirect_free; }

}  // namespace torch_neuron
