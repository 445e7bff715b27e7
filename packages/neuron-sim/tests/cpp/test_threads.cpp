// Concurrency: 8 threads doing 100k mixed allocations, frees, copies, memsets and launches in
// total. Every allocation carries its own byte pattern, so overlapping blocks or lost writes
// show up as corrupted data; at the end every counter returns to zero.
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.h"

namespace {

constexpr int kThreads = 8;
constexpr int kOpsPerThread = 100000 / kThreads;

struct Block {
  void* ptr;
  size_t size;
  uint8_t pattern;
};

struct ThreadResult {
  int errors = 0;
  std::string first_error;
  uint64_t launches = 0;
};

void fail(ThreadResult* r, const std::string& what) {
  if (r->errors++ == 0) r->first_error = what + ": " + nsimGetLastErrorMessage();
}

void worker(int tid, int devices, ThreadResult* r) {
  std::mt19937_64 rng(1234 + tid);
  std::vector<Block> live;
  std::vector<uint8_t> host(1 << 16);
  nsimQueue q;
  const int qdev = tid % devices;
  if (nsimQueueCreate(qdev, 0, &q) != NSIM_SUCCESS) return fail(r, "nsimQueueCreate");
  uint32_t kernel = 0;
  nsimRegisterName(("worker_kernel_" + std::to_string(tid)).c_str(), &kernel);
  for (int op = 0; op < kOpsPerThread; ++op) {
    const unsigned choice = rng() % 100;
    if (choice < 35 || live.empty()) {
      Block b;
      b.size = 1 + rng() % (1 << 16);
      b.pattern = static_cast<uint8_t>(rng());
      if (nsimMalloc(static_cast<int>(rng() % devices), b.size, &b.ptr) != NSIM_SUCCESS) {
        fail(r, "nsimMalloc");
        continue;
      }
      if (nsimMemset(b.ptr, b.pattern, b.size) != NSIM_SUCCESS) fail(r, "nsimMemset");
      live.push_back(b);
    } else if (choice < 65) {
      const size_t i = rng() % live.size();
      Block b = live[i];
      // Check both ends before letting the block go.
      uint8_t ends[2] = {0, 0};
      if (nsimMemcpy(&ends[0], b.ptr, 1, NSIM_MEMCPY_DEVICE_TO_HOST) != NSIM_SUCCESS ||
          nsimMemcpy(&ends[1], static_cast<char*>(b.ptr) + b.size - 1, 1,
                     NSIM_MEMCPY_DEFAULT) != NSIM_SUCCESS) {
        fail(r, "nsimMemcpy D2H");
      } else if (ends[0] != b.pattern || ends[1] != b.pattern) {
        fail(r, "corrupted block of size " + std::to_string(b.size));
      }
      if (nsimFree(b.ptr) != NSIM_SUCCESS) fail(r, "nsimFree");
      live[i] = live.back();
      live.pop_back();
    } else if (choice < 80) {
      // Device-to-device copy between two of this thread's blocks (maybe across devices).
      Block& dst = live[rng() % live.size()];
      const Block& src = live[rng() % live.size()];
      if (&dst == &src) continue;
      const size_t n = std::min(dst.size, src.size);
      if (nsimMemcpy(dst.ptr, src.ptr, n, NSIM_MEMCPY_DEVICE_TO_DEVICE) != NSIM_SUCCESS) {
        fail(r, "nsimMemcpy D2D");
      }
      if (dst.pattern != src.pattern) {
        // Restore a uniform pattern so the end checks stay meaningful.
        if (nsimMemset(dst.ptr, src.pattern, dst.size) != NSIM_SUCCESS) fail(r, "nsimMemset");
        dst.pattern = src.pattern;
      }
    } else if (choice < 90) {
      const Block& b = live[rng() % live.size()];
      if (nsimMemcpy(host.data(), b.ptr, b.size, NSIM_MEMCPY_DEVICE_TO_HOST) != NSIM_SUCCESS) {
        fail(r, "nsimMemcpy D2H");
      } else {
        for (size_t k = 0; k < b.size; k += 997) {
          if (host[k] != b.pattern) {
            fail(r, "corrupted byte");
            break;
          }
        }
        if (nsimMemcpy(b.ptr, host.data(), b.size, NSIM_MEMCPY_HOST_TO_DEVICE) != NSIM_SUCCESS) {
          fail(r, "nsimMemcpy H2D");
        }
      }
    } else {
      if (nsimLaunch(q, kernel, NSIM_LAUNCH_KERNEL, 100.0, nullptr, nullptr) != NSIM_SUCCESS) {
        fail(r, "nsimLaunch");
      } else {
        ++r->launches;
      }
      nsimEvent e;
      if (nsimEventCreate(qdev, 0, &e) != NSIM_SUCCESS || nsimEventRecord(e, q) != NSIM_SUCCESS ||
          nsimEventDestroy(e) != NSIM_SUCCESS) {
        fail(r, "event create/record/destroy");
      }
    }
  }
  for (const Block& b : live) {
    if (nsimFree(b.ptr) != NSIM_SUCCESS) fail(r, "nsimFree at the end");
  }
  if (nsimQueueDestroy(q) != NSIM_SUCCESS) fail(r, "nsimQueueDestroy");
}

}  // namespace

TEST(eight_threads_of_mixed_operations_leave_every_counter_at_zero) {
  setenv("NEURON_SIM_HBM_CAPACITY", "256M", 1);
  REQUIRE_OK(nsimInit());
  int devices = 0;
  REQUIRE_OK(nsimGetDeviceCount(&devices));
  std::vector<ThreadResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t, devices, &results[t]);
  for (auto& t : threads) t.join();
  uint64_t launches = 0;
  for (int t = 0; t < kThreads; ++t) {
    if (results[t].errors) {
      check::fail(__FILE__, __LINE__,
                  "thread " + std::to_string(t) + ": " + std::to_string(results[t].errors) +
                      " errors, first: " + results[t].first_error);
    }
    launches += results[t].launches;
  }
  uint64_t total_allocs = 0, total_frees = 0, counted_launches = 0;
  for (int d = 0; d < devices; ++d) {
    nsimCounters c;
    REQUIRE_OK(nsimGetCounters(d, &c));
    CHECK_EQ(c.live_allocations, 0u);
    CHECK_EQ(c.bytes_in_use, 0u);
    CHECK_EQ(c.live_queues, 0u);
    CHECK_EQ(c.live_events, 0u);
    CHECK_EQ(c.failed_allocations, 0u);
    CHECK(c.peak_bytes_in_use > 0);
    total_allocs += c.total_allocations;
    total_frees += c.total_frees;
    counted_launches += c.launches;
    size_t free_bytes = 0, total = 0;
    CHECK_OK(nsimMemGetInfo(d, &free_bytes, &total));
    CHECK_EQ(free_bytes, total);
    // The free list coalesced back into one block: the full capacity is allocatable.
    void* all = nullptr;
    CHECK_OK(nsimMalloc(d, total, &all));
    CHECK_OK(nsimFree(all));
  }
  CHECK_EQ(total_allocs, total_frees);
  CHECK(total_allocs > 20000);
  CHECK_EQ(counted_launches, launches);
}

NSIM_TEST_MAIN()
