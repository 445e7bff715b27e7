// Device allocations, pointer attributes, host aliases, pinned host memory, capacity errors
// and bad pointers.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "check.h"

static uint64_t shmem_kib() {  // this process's resident shared memory (memfd pages)
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("RssShmem:", 0) == 0) return std::stoull(line.substr(9));
  }
  return 0;
}

TEST(malloc_returns_aligned_distinct_device_pointers) {
  REQUIRE_OK(nsimInit());
  std::vector<void*> ptrs;
  for (size_t size : {1, 511, 512, 513, 4096, 100000}) {
    void* p = nullptr;
    REQUIRE_OK(nsimMalloc(0, size, &p));
    CHECK(reinterpret_cast<uintptr_t>(p) % NSIM_ALIGNMENT == 0);
    nsimPointerAttributes a;
    CHECK_OK(nsimPointerGetAttributes(p, &a));
    CHECK_EQ(a.type, NSIM_MEMORY_DEVICE);
    CHECK_EQ(a.device, 0);
    CHECK(a.base == p);
    CHECK_EQ(a.size, size);
    ptrs.push_back(p);
  }
  for (size_t i = 1; i < ptrs.size(); ++i) CHECK(ptrs[i] != ptrs[i - 1]);
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.live_allocations, ptrs.size());
  CHECK_EQ(c.total_allocations, ptrs.size());
  // bytes_in_use counts the aligned footprint: 512 + 512 + 512 + 1024 + 4096 + 100352.
  CHECK_EQ(c.bytes_in_use, uint64_t(512 + 512 + 512 + 1024 + 4096 + 100352));
  size_t free_bytes = 0, total = 0;
  CHECK_OK(nsimMemGetInfo(0, &free_bytes, &total));
  CHECK_EQ(total - free_bytes, c.bytes_in_use);
  for (void* p : ptrs) CHECK_OK(nsimFree(p));
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.live_allocations, 0u);
  CHECK_EQ(c.bytes_in_use, 0u);
  CHECK_EQ(c.total_frees, ptrs.size());
  CHECK_EQ(c.peak_bytes_in_use, uint64_t(512 + 512 + 512 + 1024 + 4096 + 100352));
  CHECK_OK(nsimResetPeakCounters(0));
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.peak_bytes_in_use, 0u);
  CHECK_OK(nsimFree(nullptr));
}

TEST(pointers_of_each_device_belong_to_that_device) {
  REQUIRE_OK(nsimInit());
  void* a = nullptr;
  void* b = nullptr;
  REQUIRE_OK(nsimMalloc(1, 1000, &a));
  REQUIRE_OK(nsimMalloc(3, 1000, &b));
  nsimPointerAttributes attr;
  CHECK_OK(nsimPointerGetAttributes(a, &attr));
  CHECK_EQ(attr.device, 1);
  CHECK_OK(nsimPointerGetAttributes(static_cast<char*>(b) + 999, &attr));
  CHECK_EQ(attr.device, 3);
  CHECK(attr.base == b);
  CHECK_EQ(attr.type, NSIM_MEMORY_DEVICE);
  CHECK_OK(nsimPointerGetAttributes(static_cast<char*>(b) + 1000, &attr));
  CHECK_EQ(attr.type, NSIM_MEMORY_DEVICE_UNALLOCATED);
  CHECK_EQ(attr.device, 3);
  int local = 0;
  CHECK_OK(nsimPointerGetAttributes(&local, &attr));
  CHECK_EQ(attr.type, NSIM_MEMORY_UNREGISTERED);
  CHECK_EQ(attr.device, -1);
  CHECK_OK(nsimPointerGetAttributes(nullptr, &attr));
  CHECK_EQ(attr.type, NSIM_MEMORY_UNREGISTERED);
  CHECK_OK(nsimFree(a));
  CHECK_OK(nsimFree(b));
}

TEST(host_alias_reaches_the_bytes_and_translates_back) {
  REQUIRE_OK(nsimInit());
  void* p = nullptr;
  REQUIRE_OK(nsimMalloc(2, 4096, &p));
  void* alias = nullptr;
  REQUIRE_OK(nsimDeviceToHost(p, 4096, &alias));
  CHECK(alias != p);
  CHECK(nsimDeviceToHostUnchecked(p) == alias);
  CHECK(nsimHostToDeviceUnchecked(alias) == p);
  CHECK(nsimDeviceToHostUnchecked(static_cast<char*>(p) + 100) == static_cast<char*>(alias) + 100);
  int local = 0;
  CHECK(nsimDeviceToHostUnchecked(&local) == nullptr);
  CHECK(nsimHostToDeviceUnchecked(&local) == nullptr);
  CHECK(nsimDeviceOfUnchecked(p) == 2);
  CHECK(nsimDeviceOfUnchecked(static_cast<char*>(p) + 4095) == 2);
  CHECK(nsimDeviceOfUnchecked(&local) == -1);
  CHECK(nsimDeviceOfUnchecked(alias) == -1);
  auto* bytes = static_cast<unsigned char*>(alias);
  for (int i = 0; i < 4096; ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  std::vector<unsigned char> out(4096);
  REQUIRE_OK(nsimMemcpy(out.data(), p, 4096, NSIM_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4096; ++i) {
    if (out[i] != static_cast<unsigned char>(i * 7)) {
      CHECK(out[i] == static_cast<unsigned char>(i * 7));
      break;
    }
  }
  // Ranges must stay inside the allocation.
  CHECK_ERR(nsimDeviceToHost(p, 4097, &alias), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "runs past the end");
  CHECK_ERR(nsimDeviceToHost(&local, 4, &alias), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not a device address");
  CHECK_OK(nsimFree(p));
  CHECK_ERR(nsimDeviceToHost(p, 1, &alias), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not inside any live allocation");
}

TEST(out_of_memory_names_sizes_and_recovers_after_free) {
  setenv("NEURON_SIM_HBM_CAPACITY", "64M", 1);
  REQUIRE_OK(nsimInit());
  void* a = nullptr;
  void* b = nullptr;
  REQUIRE_OK(nsimMalloc(0, 40u << 20, &a));
  CHECK_ERR(nsimMalloc(0, 40u << 20, &b), NSIM_ERROR_OUT_OF_MEMORY);
  const std::string msg = nsimGetLastErrorMessage();
  CHECK_CONTAINS(msg, "nsimMalloc: out of memory on neuron device 0");
  CHECK_CONTAINS(msg, "requested 40.00 MiB (41943040 bytes)");
  CHECK_CONTAINS(msg, "in use 40.00 MiB (41943040 bytes)");
  CHECK_CONTAINS(msg, "capacity 64.00 MiB (67108864 bytes)");
  CHECK_CONTAINS(msg, "free 24.00 MiB (25165824 bytes)");
  CHECK_CONTAINS(msg, "largest free block 24.00 MiB");
  CHECK_CONTAINS(msg, "NEURON_SIM_HBM_CAPACITY");
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.failed_allocations, 1u);
  // Other devices have their own capacity.
  REQUIRE_OK(nsimMalloc(1, 40u << 20, &b));
  CHECK_OK(nsimFree(b));
  CHECK_OK(nsimFree(a));
  REQUIRE_OK(nsimMalloc(0, 40u << 20, &b));
  CHECK_OK(nsimFree(b));
  // The whole capacity in one block, after coalescing.
  REQUIRE_OK(nsimMalloc(0, 64u << 20, &b));
  CHECK_OK(nsimFree(b));
}

TEST(fragmentation_is_reported_as_largest_free_block) {
  setenv("NEURON_SIM_HBM_CAPACITY", "4M", 1);
  REQUIRE_OK(nsimInit());
  std::vector<void*> blocks(4);
  for (auto& p : blocks) REQUIRE_OK(nsimMalloc(0, 1u << 20, &p));
  CHECK_OK(nsimFree(blocks[0]));
  CHECK_OK(nsimFree(blocks[2]));
  void* big = nullptr;
  CHECK_ERR(nsimMalloc(0, 2u << 20, &big), NSIM_ERROR_OUT_OF_MEMORY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "free 2.00 MiB");
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "largest free block 1.00 MiB");
  CHECK_OK(nsimFree(blocks[1]));  // blocks 0..2 coalesce
  REQUIRE_OK(nsimMalloc(0, 3u << 20, &big));
  CHECK(big == blocks[0]);
  CHECK_OK(nsimFree(big));
  CHECK_OK(nsimFree(blocks[3]));
}

TEST(best_fit_picks_the_smallest_block_that_fits) {
  setenv("NEURON_SIM_HBM_CAPACITY", "1M", 1);
  REQUIRE_OK(nsimInit());
  void *a, *sep1, *b, *sep2, *rest;
  REQUIRE_OK(nsimMalloc(0, 64 * 1024, &a));
  REQUIRE_OK(nsimMalloc(0, 512, &sep1));
  REQUIRE_OK(nsimMalloc(0, 8 * 1024, &b));
  REQUIRE_OK(nsimMalloc(0, 512, &sep2));
  size_t free_bytes = 0, total = 0;
  CHECK_OK(nsimMemGetInfo(0, &free_bytes, &total));
  REQUIRE_OK(nsimMalloc(0, free_bytes, &rest));  // fill the tail exactly
  CHECK_OK(nsimFree(a));
  CHECK_OK(nsimFree(b));
  void* p = nullptr;
  REQUIRE_OK(nsimMalloc(0, 6 * 1024, &p));
  CHECK(p == b);  // the 8 KiB hole, not the 64 KiB one
  void* q = nullptr;
  REQUIRE_OK(nsimMalloc(0, 10 * 1024, &q));
  CHECK(q == a);
  for (void* x : {p, q, sep1, sep2, rest}) CHECK_OK(nsimFree(x));
}

TEST(zero_and_huge_sizes_are_rejected_without_crashing) {
  REQUIRE_OK(nsimInit());
  void* p = reinterpret_cast<void*>(1);
  CHECK_ERR(nsimMalloc(0, 0, &p), NSIM_ERROR_INVALID_VALUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "size is 0");
  CHECK_ERR(nsimMalloc(0, SIZE_MAX, &p), NSIM_ERROR_OUT_OF_MEMORY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "out of memory on neuron device 0");
  CHECK_ERR(nsimMalloc(0, SIZE_MAX - 100, &p), NSIM_ERROR_OUT_OF_MEMORY);
  CHECK_ERR(nsimMalloc(0, (size_t(24) << 30) + 1, &p), NSIM_ERROR_OUT_OF_MEMORY);
  CHECK_ERR(nsimMalloc(4, 16, &p), NSIM_ERROR_INVALID_DEVICE);
  CHECK_ERR(nsimMalloc(-1, 16, &p), NSIM_ERROR_INVALID_DEVICE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "invalid neuron device -1");
  CHECK_ERR(nsimMalloc(0, 16, nullptr), NSIM_ERROR_INVALID_VALUE);
  // The full default share (24 GiB) is reservable: pages are only touched on use.
  REQUIRE_OK(nsimMalloc(0, size_t(24) << 30, &p));
  CHECK_OK(nsimFree(p));
}

TEST(bad_frees_name_the_address_and_what_it_is) {
  REQUIRE_OK(nsimInit());
  void* p = nullptr;
  REQUIRE_OK(nsimMalloc(0, 4096, &p));
  char* interior = static_cast<char*>(p) + 512;
  CHECK_ERR(nsimFree(interior), NSIM_ERROR_INVALID_POINTER);
  std::string msg = nsimGetLastErrorMessage();
  CHECK_CONTAINS(msg, "inside allocation base=");
  CHECK_CONTAINS(msg, "of size 4096");
  CHECK_CONTAINS(msg, "not its start");
  CHECK_OK(nsimFree(p));
  CHECK_ERR(nsimFree(p), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "already freed");
  int local = 0;
  CHECK_ERR(nsimFree(&local), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not a device address");
  void* host = nullptr;
  REQUIRE_OK(nsimMallocHost(100, &host));
  CHECK_ERR(nsimFree(host), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "nsimFreeHost");
  CHECK_OK(nsimFreeHost(host));
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.live_allocations, 0u);
  CHECK_EQ(c.total_frees, 1u);
}

TEST(pinned_host_memory_is_tracked_and_checked) {
  REQUIRE_OK(nsimInit());
  void* h = nullptr;
  REQUIRE_OK(nsimMallocHost(10000, &h));
  CHECK(reinterpret_cast<uintptr_t>(h) % static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)) == 0);
  static_cast<char*>(h)[9999] = 1;  // writable
  nsimPointerAttributes a;
  CHECK_OK(nsimPointerGetAttributes(static_cast<char*>(h) + 5000, &a));
  CHECK_EQ(a.type, NSIM_MEMORY_HOST);
  CHECK(a.base == h);
  CHECK_EQ(a.size, size_t(10000));
  CHECK_EQ(a.device, -1);
  CHECK_OK(nsimPointerGetAttributes(static_cast<char*>(h) + 10000, &a));
  CHECK_EQ(a.type, NSIM_MEMORY_UNREGISTERED);
  uint64_t live = 0, bytes = 0;
  CHECK_OK(nsimGetHostCounters(&live, &bytes));
  CHECK_EQ(live, 1u);
  CHECK_EQ(bytes, 10000u);
  CHECK_ERR(nsimFreeHost(static_cast<char*>(h) + 8), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not its start");
  CHECK_OK(nsimFreeHost(h));
  CHECK_ERR(nsimFreeHost(h), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not pinned host memory");
  CHECK_ERR(nsimMallocHost(0, &h), NSIM_ERROR_INVALID_VALUE);
  CHECK_OK(nsimGetHostCounters(&live, &bytes));
  CHECK_EQ(live, 0u);
  CHECK_EQ(bytes, 0u);
}

TEST(freeing_large_blocks_returns_pages_to_the_host) {
  REQUIRE_OK(nsimInit());
  const size_t size = 64u << 20;
  void* p = nullptr;
  REQUIRE_OK(nsimMalloc(0, size, &p));
  const uint64_t before = shmem_kib();
  REQUIRE_OK(nsimMemset(p, 1, size));  // touches every page
  const uint64_t touched = shmem_kib();
  CHECK(touched >= before + (size >> 10) * 9 / 10);
  CHECK_OK(nsimFree(p));
  const uint64_t after = shmem_kib();
  CHECK(after + (size >> 10) * 9 / 10 <= touched);
}

NSIM_TEST_MAIN()
