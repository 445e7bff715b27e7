#include "device_memory.h"

#include <cinttypes>
#include <string>

#include "error.h"
#include "fault_injection.h"
#include "host_memory.h"

namespace nsim {
namespace {

// Pages of freed blocks at least this large go back to the kernel; smaller blocks are
// likely reused soon and their pages stay resident.
constexpr uint64_t kReleasePagesThreshold = 1ull << 20;

nsimError out_of_memory(Device* d, const char* reason, size_t size) {
  const DeviceAllocator::Stats s = d->allocator->stats();
  return set_error(NSIM_ERROR_OUT_OF_MEMORY,
                   "nsimMalloc: %s on neuron device %d: requested %s, in use %s, capacity %s, "
                   "free %s (largest free block %s). Free tensors or set NEURON_SIM_HBM_CAPACITY",
                   reason, d->index, format_bytes(size).c_str(), format_bytes(s.in_use).c_str(),
                   format_bytes(s.capacity).c_str(), format_bytes(s.capacity - s.in_use).c_str(),
                   format_bytes(s.largest_free).c_str());
}

void raise_peak(std::atomic<uint64_t>& peak, uint64_t value) {
  uint64_t cur = peak.load(std::memory_order_relaxed);
  while (value > cur && !peak.compare_exchange_weak(cur, value)) {
  }
}

void* alias_of(const AddressView& v, const void* p) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) - v.dev_base + v.alias_base);
}

}  // namespace

int device_index_of(const void* p) {
  uint64_t offset = 0;
  return device_of(address_view(), reinterpret_cast<uintptr_t>(p), &offset);
}

nsimError resolve_device_range(Runtime* rt, const char* call, const char* role, const void* p,
                               size_t size, nsimError bad_range, Device** device, void** alias) {
  const AddressView v = address_view();
  uint64_t offset = 0;
  const int idx = device_of(v, reinterpret_cast<uintptr_t>(p), &offset);
  if (idx < 0) {
    return set_error(NSIM_ERROR_INVALID_POINTER, "%s: %s=%p is not a device address", call, role,
                     p);
  }
  Device* d = rt->devices[idx].get();
  nsimError err = check_device(d, call);
  if (err != NSIM_SUCCESS) return err;
  DeviceAllocator::Block b;
  if (!d->allocator->find(offset, &b)) {
    return set_error(bad_range,
                     "%s: %s=%p on neuron device %d is not inside any live allocation "
                     "(unallocated or freed device memory)",
                     call, role, p, idx);
  }
  const uint64_t in_block = offset - b.offset;
  if (size > b.size - in_block) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(p) - in_block;
    return set_error(bad_range,
                     "%s: %s range [%p, +%zu) runs past the end of its allocation base=0x%" PRIxPTR
                     " size=%" PRIu64 " on neuron device %d (offset %" PRIu64
                     ", %" PRIu64 " bytes left)",
                     call, role, p, size, base, b.size, idx, in_block, b.size - in_block);
  }
  *device = d;
  *alias = alias_of(v, p);
  return NSIM_SUCCESS;
}

}  // namespace nsim

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimMalloc(int device, size_t size, void** ptr) {
  Runtime* rt = runtime_or_error("nsimMalloc");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimMalloc", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  nsimError err = check_device(d, "nsimMalloc");
  if (err != NSIM_SUCCESS) return err;
  if (!ptr) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimMalloc: ptr is NULL");
  if (size == 0) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimMalloc: size is 0 on neuron device %d; request at least 1 byte", device);
  }
  if (consume_alloc_fault()) {
    d->counters.failed_allocations.fetch_add(1);
    return out_of_memory(d, "injected allocation failure (nsimFaultFailNthAlloc)", size);
  }
  DeviceAllocator::Block b;
  if (size > d->allocator->capacity() || !d->allocator->allocate(size, &b)) {
    d->counters.failed_allocations.fetch_add(1);
    return out_of_memory(d, "out of memory", size);
  }
  DeviceCounters& c = d->counters;
  c.live_allocations.fetch_add(1);
  c.total_allocations.fetch_add(1);
  raise_peak(c.peak_bytes_in_use, c.bytes_in_use.fetch_add(b.reserved) + b.reserved);
  *ptr = reinterpret_cast<void*>(rt->space.device_base(device) + b.offset);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimFree(void* ptr) {
  // The allocation belongs to the parent of a forked child; releasing its pages here would
  // zero the parent's data.
  if (g_forked_child.load(std::memory_order_relaxed)) return NSIM_SUCCESS;
  Runtime* rt = runtime_or_error("nsimFree");
  if (!rt) return runtime_unavailable();
  if (!ptr) return NSIM_SUCCESS;
  uint64_t offset = 0;
  const int idx = device_of(address_view(), reinterpret_cast<uintptr_t>(ptr), &offset);
  if (idx < 0) {
    void* base = nullptr;
    size_t size = 0;
    if (find_host_allocation(ptr, &base, &size)) {
      return set_error(NSIM_ERROR_INVALID_POINTER,
                       "nsimFree: %p is pinned host memory (base=%p size=%zu); free it with "
                       "nsimFreeHost",
                       ptr, base, size);
    }
    return set_error(NSIM_ERROR_INVALID_POINTER,
                     "nsimFree: %p is not a device address (not returned by nsimMalloc)", ptr);
  }
  Device* d = rt->devices[idx].get();
  nsimError err = check_device(d, "nsimFree");
  if (err != NSIM_SUCCESS) return err;
  DeviceAllocator::Block b;
  switch (d->allocator->release(offset, &b)) {
    case DeviceAllocator::FreeStatus::kFreed:
      break;
    case DeviceAllocator::FreeStatus::kAlreadyFreed:
      return set_error(NSIM_ERROR_INVALID_POINTER,
                       "nsimFree: %p on neuron device %d was already freed (double free)", ptr,
                       idx);
    case DeviceAllocator::FreeStatus::kInterior:
      return set_error(NSIM_ERROR_INVALID_POINTER,
                       "nsimFree: %p on neuron device %d is inside allocation base=%p of size %" PRIu64
                       " (offset %" PRIu64 ", not its start)",
                       ptr, idx, static_cast<char*>(ptr) - (offset - b.offset), b.size,
                       offset - b.offset);
    case DeviceAllocator::FreeStatus::kUnallocated:
      return set_error(NSIM_ERROR_INVALID_POINTER,
                       "nsimFree: %p on neuron device %d is not the start of a live allocation "
                       "(never allocated, or freed long ago)",
                       ptr, idx);
  }
  if (b.reserved >= kReleasePagesThreshold) rt->space.release_pages(idx, b.offset, b.reserved);
  DeviceCounters& c = d->counters;
  c.live_allocations.fetch_sub(1);
  c.total_frees.fetch_add(1);
  c.bytes_in_use.fetch_sub(b.reserved);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes) {
  Runtime* rt = runtime_or_error("nsimMemGetInfo");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimMemGetInfo", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!free_bytes || !total_bytes) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimMemGetInfo: output pointers are NULL");
  }
  const DeviceAllocator::Stats s = d->allocator->stats();
  *free_bytes = s.capacity - s.in_use;
  *total_bytes = s.capacity;
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimPointerGetAttributes(const void* ptr, nsimPointerAttributes* attr) {
  Runtime* rt = runtime_or_error("nsimPointerGetAttributes");
  if (!rt) return runtime_unavailable();
  if (!attr) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimPointerGetAttributes: attr is NULL");
  *attr = nsimPointerAttributes{NSIM_MEMORY_UNREGISTERED, -1, nullptr, 0};
  uint64_t offset = 0;
  const int idx = device_of(address_view(), reinterpret_cast<uintptr_t>(ptr), &offset);
  if (idx >= 0) {
    attr->device = idx;
    DeviceAllocator::Block b;
    if (rt->devices[idx]->allocator->find(offset, &b)) {
      attr->type = NSIM_MEMORY_DEVICE;
      attr->base = const_cast<char*>(static_cast<const char*>(ptr)) - (offset - b.offset);
      attr->size = b.size;
    } else {
      attr->type = NSIM_MEMORY_DEVICE_UNALLOCATED;
    }
    return NSIM_SUCCESS;
  }
  void* base = nullptr;
  size_t size = 0;
  if (find_host_allocation(ptr, &base, &size)) {
    attr->type = NSIM_MEMORY_HOST;
    attr->base = base;
    attr->size = size;
  }
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimDeviceToHost(const void* device_ptr, size_t size, void** host_alias) {
  Runtime* rt = runtime_or_error("nsimDeviceToHost");
  if (!rt) return runtime_unavailable();
  if (!host_alias) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimDeviceToHost: host_alias is NULL");
  Device* d = nullptr;
  return resolve_device_range(rt, "nsimDeviceToHost", "device_ptr", device_ptr, size,
                              NSIM_ERROR_INVALID_POINTER, &d, host_alias);
}

NSIM_API void* nsimDeviceToHostUnchecked(const void* device_ptr) {
  const AddressView v = address_view();
  uint64_t offset = 0;
  if (device_of(v, reinterpret_cast<uintptr_t>(device_ptr), &offset) < 0) return nullptr;
  return alias_of(v, device_ptr);
}

NSIM_API int nsimDeviceOfUnchecked(const void* device_ptr) {
  uint64_t offset = 0;
  return device_of(address_view(), reinterpret_cast<uintptr_t>(device_ptr), &offset);
}

NSIM_API void* nsimHostToDeviceUnchecked(const void* host_alias) {
  const AddressView v = address_view();
  const uintptr_t p = reinterpret_cast<uintptr_t>(host_alias);
  if (v.span == 0 || p < v.alias_base || p - v.alias_base >= v.span) return nullptr;
  return reinterpret_cast<void*>(p - v.alias_base + v.dev_base);
}

}  // extern "C"
