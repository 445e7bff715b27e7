#include "runtime/NeuronHostAllocator.h"

#include "runtime/NeuronRuntime.h"

#include <mutex>
#include <unordered_map>

namespace torch_neuron {
namespace {

class NeuronHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t n) override {
    ensure_initialized();
    if (n == 0) {
      return at::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    }
    void* ptr = nullptr;
    NEURON_CHECK(nsimMallocHost(n, &ptr));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[ptr] = n;
      stats_.active_requests.increase(1);
      stats_.active_bytes.increase(n);
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(n);
      stats_.num_host_alloc += 1;
    }
    return at::DataPtr(ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void*, void*, c10::Stream) override {
    // Copies complete before they return, so a pinned buffer is never in flight.
    return true;
  }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.active_requests.reset_accumulated();
    stats_.active_bytes.reset_accumulated();
    stats_.allocations.reset_accumulated();
    stats_.allocated_bytes.reset_accumulated();
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.active_requests.reset_peak();
    stats_.active_bytes.reset_peak();
    stats_.allocations.reset_peak();
    stats_.allocated_bytes.reset_peak();
  }

  void release(void* ptr) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        stats_.active_requests.decrease(1);
        stats_.active_bytes.decrease(it->second);
        stats_.allocations.decrease(1);
        stats_.allocated_bytes.decrease(it->second);
        stats_.num_host_free += 1;
        sizes_.erase(it);
      }
    }
    nsimFreeHost(ptr);
  }

 private:
  static void free_pinned(void* ptr);
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;
  at::HostStats stats_;
};

NeuronHostAllocator g_host_allocator;
void NeuronHostAllocator::free_pinned(void* ptr) { g_host_allocator.release(ptr); }

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

}  // namespace

at::HostAllocator* host_allocator() { return &g_host_allocator; }

bool is_pinned_ptr(const void* ptr) {
  if (!ptr || !nsimIsInitialized()) return false;
  nsimPointerAttributes attr{};
  return nsimPointerGetAttributes(ptr, &attr) == NSIM_SUCCESS && attr.type == NSIM_MEMORY_HOST;
}

}  // namespace torch_neuron
