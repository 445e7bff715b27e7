#include "address_space.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace nsim {
namespace {

constexpr uint64_t kHugePage = 2ull << 20;

std::atomic<uintptr_t> g_dev_base{0}, g_alias_base{0};
std::atomic<uint64_t> g_stride{0}, g_span{0}, g_capacity{0};
std::atomic<int> g_devices{0};
uint64_t g_page_size = 4096;

std::string errno_text(const char* what) { return std::string(what) + ": " + strerror(errno); }

}  // namespace

AddressView address_view() {
  AddressView v;
  v.dev_base = g_dev_base.load(std::memory_order_acquire);
  v.alias_base = g_alias_base.load(std::memory_order_relaxed);
  v.stride = g_stride.load(std::memory_order_relaxed);
  v.span = g_span.load(std::memory_order_relaxed);
  v.capacity = g_capacity.load(std::memory_order_relaxed);
  v.devices = g_devices.load(std::memory_order_relaxed);
  return v;
}

bool AddressSpace::create(int devices, uint64_t capacity, std::string* error) {
  g_page_size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // 2 MiB strides keep each device's base huge-page aligned relative to the reservation.
  stride_ = (capacity + kHugePage - 1) & ~(kHugePage - 1);
  span_ = stride_ * static_cast<uint64_t>(devices);
  const int reserve_flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* dev = mmap(nullptr, span_, PROT_NONE, reserve_flags, -1, 0);
  if (dev == MAP_FAILED) {
    *error = errno_text("mmap of the device address range");
    return false;
  }
  void* alias = mmap(nullptr, span_, PROT_NONE, reserve_flags, -1, 0);
  if (alias == MAP_FAILED) {
    *error = errno_text("mmap of the device alias range");
    munmap(dev, span_);
    return false;
  }
  dev_base_ = reinterpret_cast<uintptr_t>(dev);
  alias_base_ = reinterpret_cast<uintptr_t>(alias);
  for (int d = 0; d < devices; ++d) {
    std::string name = "neuron_sim_device" + std::to_string(d);
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) {
      *error = errno_text("memfd_create");
      destroy();
      return false;
    }
    fds_.push_back(fd);
    // Sparse: the file has the device's size, but pages exist only once touched.
    if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
      *error = errno_text("ftruncate of the device memfd");
      destroy();
      return false;
    }
    void* at = reinterpret_cast<void*>(alias_base_ + uint64_t(d) * stride_);
    void* m = mmap(at, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
      *error = errno_text("mmap of the device memfd alias");
      destroy();
      return false;
    }
  }
  g_alias_base.store(alias_base_, std::memory_order_relaxed);
  g_stride.store(stride_, std::memory_order_relaxed);
  g_span.store(span_, std::memory_order_relaxed);
  g_capacity.store(capacity, std::memory_order_relaxed);
  g_devices.store(devices, std::memory_order_relaxed);
  g_dev_base.store(dev_base_, std::memory_order_release);
  return true;
}

void AddressSpace::destroy() {
  g_span.store(0, std::memory_order_release);
  g_dev_base.store(0, std::memory_order_release);
  g_devices.store(0, std::memory_order_relaxed);
  if (dev_base_) munmap(reinterpret_cast<void*>(dev_base_), span_);
  if (alias_base_) munmap(reinterpret_cast<void*>(alias_base_), span_);
  for (int fd : fds_) close(fd);
  fds_.clear();
  dev_base_ = alias_base_ = 0;
  stride_ = span_ = 0;
}

void AddressSpace::release_pages(int d, uint64_t offset, uint64_t size) {
  const uint64_t begin = (offset + g_page_size - 1) & ~(g_page_size - 1);
  const uint64_t end = (offset + size) & ~(g_page_size - 1);
  if (end <= begin || d < 0 || d >= static_cast<int>(fds_.size())) return;
  // Best effort: on failure the pages simply stay resident until reused.
  fallocate(fds_[d], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(begin),
            static_cast<off_t>(end - begin));
}

}  // namespace nsim
