#include "host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "error.h"
#include "runtime.h"

namespace nsim {
namespace {

std::mutex g_host_mu;
std::map<uintptr_t, size_t>& host_blocks() {  // base -> requested size
  static auto* m = new std::map<uintptr_t, size_t>();
  return *m;
}
std::atomic<uint64_t> g_host_live{0}, g_host_bytes{0};

size_t mapped_size(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) & ~(page - 1);
}

bool find_locked(uintptr_t p, uintptr_t* base, size_t* size) {
  auto& blocks = host_blocks();
  auto it = blocks.upper_bound(p);
  if (it == blocks.begin()) return false;
  --it;
  if (p >= it->first + it->second) return false;
  *base = it->first;
  *size = it->second;
  return true;
}

}  // namespace

bool find_host_allocation(const void* p, void** base, size_t* size) {
  std::lock_guard<std::mutex> lock(g_host_mu);
  uintptr_t b = 0;
  if (!find_locked(reinterpret_cast<uintptr_t>(p), &b, size)) return false;
  *base = reinterpret_cast<void*>(b);
  return true;
}

void release_all_host_memory() {
  std::lock_guard<std::mutex> lock(g_host_mu);
  for (auto& [base, size] : host_blocks()) munmap(reinterpret_cast<void*>(base), mapped_size(size));
  host_blocks().clear();
  g_host_live.store(0);
  g_host_bytes.store(0);
}

}  // namespace nsim

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimMallocHost(size_t size, void** ptr) {
  if (!runtime_or_error("nsimMallocHost")) return runtime_unavailable();
  if (!ptr) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimMallocHost: ptr is NULL");
  if (size == 0) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimMallocHost: size is 0; request at least 1 byte");
  }
  if (size > (SIZE_MAX >> 1)) {
    return set_error(NSIM_ERROR_OUT_OF_MEMORY, "nsimMallocHost: cannot allocate %s of host memory",
                     format_bytes(size).c_str());
  }
  void* p = mmap(nullptr, mapped_size(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) {
    return set_error(NSIM_ERROR_OUT_OF_MEMORY,
                     "nsimMallocHost: the host refused %s of pinned memory (mmap failed)",
                     format_bytes(size).c_str());
  }
  {
    std::lock_guard<std::mutex> lock(g_host_mu);
    host_blocks().emplace(reinterpret_cast<uintptr_t>(p), size);
  }
  g_host_live.fetch_add(1);
  g_host_bytes.fetch_add(size);
  *ptr = p;
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimFreeHost(void* ptr) {
  if (g_forked_child.load(std::memory_order_relaxed)) return NSIM_SUCCESS;  // see nsimFree
  if (!runtime_or_error("nsimFreeHost")) return runtime_unavailable();
  if (!ptr) return NSIM_SUCCESS;
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(g_host_mu);
    auto& blocks = host_blocks();
    auto it = blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == blocks.end()) {
      uintptr_t base = 0;
      if (find_locked(reinterpret_cast<uintptr_t>(ptr), &base, &size)) {
        return set_error(NSIM_ERROR_INVALID_POINTER,
                         "nsimFreeHost: %p is inside pinned allocation base=%p of size %zu "
                         "(offset %zu), not its start",
                         ptr, reinterpret_cast<void*>(base), size,
                         static_cast<size_t>(reinterpret_cast<uintptr_t>(ptr) - base));
      }
      return set_error(NSIM_ERROR_INVALID_POINTER,
                       "nsimFreeHost: %p is not pinned host memory from nsimMallocHost (already "
                       "freed, or a device pointer: use nsimFree)",
                       ptr);
    }
    size = it->second;
    blocks.erase(it);
  }
  munmap(ptr, mapped_size(size));
  g_host_live.fetch_sub(1);
  g_host_bytes.fetch_sub(size);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimGetHostCounters(uint64_t* live_allocations, uint64_t* bytes_in_use) {
  if (!runtime_or_error("nsimGetHostCounters")) return runtime_unavailable();
  if (!live_allocations || !bytes_in_use) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimGetHostCounters: output pointers are NULL");
  }
  *live_allocations = g_host_live.load();
  *bytes_in_use = g_host_bytes.load();
  return NSIM_SUCCESS;
}

}  // extern "C"
