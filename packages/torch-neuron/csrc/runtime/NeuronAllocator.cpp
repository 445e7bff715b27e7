#include "runtime/NeuronAllocator.h"

#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStream.h"
#include "runtime/SanitizerLog.h"
#include "runtime/Valueless.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace torch_neuron {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;          // largest "small" request
constexpr size_t kSmallBuffer = 2 << 20;        // small-pool segment size
constexpr size_t kLargeBuffer = 20 << 20;       // large-pool segment size for mid-size requests
constexpr size_t kMinLargeAlloc = 10 << 20;     // above this, segments are sized to the request
constexpr size_t kRoundLarge = 2 << 20;

std::atomic<int> g_phase{0};

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream;
  size_t size;
  size_t requested = 0;
  char* ptr;
  bool small;
  bool allocated = false;
  bool inactive_split_counted = false;
  bool parked = false;  // freed small block waiting in its exact-size list (not in a pool)
  bool scratch = false;  // a host kernel's allocation that no result adopted (yet)
  uint8_t phase = 0;     // the allocation phase at malloc (AllocationPhase)
  Block* prev = nullptr;
  Block* next = nullptr;
  std::unordered_set<c10::StreamId> stream_uses;
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

std::string bytes_str(size_t n) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (n >= (1ull << 30)) os << static_cast<double>(n) / (1ull << 30) << " GiB";
  else if (n >= (1ull << 20)) os << static_cast<double>(n) / (1ull << 20) << " MiB";
  else if (n >= 1024) os << static_cast<double>(n) / 1024 << " KiB";
  else os << n << " bytes";
  return os.str();
}

class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device) : device_(device) { live_.reserve(4096); }

  Block* malloc(size_t requested, c10::StreamId stream, bool scratch = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t size = round_size(requested);
    const bool small = size <= kSmallSize;
    Block* block = small ? unpark(size, stream) : nullptr;
    if (!block) {
      auto& pool = small ? small_free_ : large_free_;
      Block key{device_, stream, size, 0, nullptr, small};
      auto it = pool.lower_bound(&key);
      if (it != pool.end() && (*it)->stream == stream) {
        block = *it;
        take_from_pool(block);
      } else {
        block = new_segment(size, small, stream, requested);
      }
      block = maybe_split(block, size);
    }
    block->allocated = true;
    block->requested = requested;
    block->scratch = scratch;
    block->phase = static_cast<uint8_t>(g_phase.load(std::memory_order_relaxed));
    live_[block->ptr] = block;
    for_types(small, [&](size_t t) {
      stats_.allocation[t].increase(1);
      stats_.allocated_bytes[t].increase(block->size);
      stats_.active[t].increase(1);
      stats_.active_bytes[t].increase(block->size);
      stats_.requested_bytes[t].increase(requested);
    });
    if (scratch) {
      usage_.scratch += block->size;
      usage_.scratch_peak = std::max(usage_.scratch_peak, usage_.scratch);
    } else {
      usage_.by_phase[block->phase] += block->size;
    }
    note_tensor_peak();
    report_to_profiler(block->ptr, static_cast<int64_t>(block->size));
    return block;
  }

  // Returns false if ptr is not a live block of this device. `freed`, when given, receives
  // what the stream-race sanitizer logs once the lock is released.
  bool free(void* ptr, SanitizerEvent* freed = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return false;
    Block* block = it->second;
    live_.erase(it);
    block->allocated = false;
    if (freed) {
      *freed = SanitizerEvent{SanitizerEventKind::Free, reinterpret_cast<uintptr_t>(block->ptr),
                              block->size, device_, block->stream,
                              std::vector<int64_t>(block->stream_uses.begin(), block->stream_uses.end())};
    }
    // Host execution is synchronous, so work on the streams recorded with
    // record_stream has finished by the time the block is freed.
    block->stream_uses.clear();
    for_types(block->small, [&](size_t t) {
      stats_.allocation[t].decrease(1);
      stats_.allocated_bytes[t].decrease(block->size);
      stats_.active[t].decrease(1);
      stats_.active_bytes[t].decrease(block->size);
      stats_.requested_bytes[t].decrease(block->requested);
    });
    (block->scratch ? usage_.scratch : usage_.by_phase[block->phase]) -= block->size;
    block->scratch = false;
    block->requested = 0;
    report_to_profiler(block->ptr, -static_cast<int64_t>(block->size));
    if (!park(block)) merge_and_cache(block);
    return true;
  }

  // torch.profiler(profile_memory=True) records device allocations; one thread-local read
  // when no profiler is active.
  void report_to_profiler(void* ptr, int64_t delta) {
    if (C10_LIKELY(!c10::memoryProfilingEnabled())) return;
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    c10::reportMemoryUsageToProfiler(ptr, delta, stats_.allocated_bytes[agg].current,
                                     stats_.reserved_bytes[agg].current,
                                     c10::Device(c10::DeviceType::PrivateUse1, device_));
  }

  // A host kernel's allocation became a neuron tensor's storage: no longer scratch.
  void adopt(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end() || !it->second->scratch) return;
    Block* b = it->second;
    b->scratch = false;
    usage_.scratch -= b->size;
    usage_.by_phase[b->phase] += b->size;
    note_tensor_peak();
  }

  Usage usage() {
    std::lock_guard<std::mutex> lock(mutex_);
    return usage_;
  }

  bool record_stream(void* ptr, c10::StreamId stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return false;
    if (stream != it->second->stream) it->second->stream_uses.insert(stream);
    return true;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached();
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    each_stat([](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
    usage_.tensor_peak = tensor_bytes();
    usage_.at_peak = usage_.by_phase;
    usage_.scratch_peak = usage_.scratch;
  }
  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    each_stat([](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

 private:
  size_t tensor_bytes() const {
    return stats_.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current - usage_.scratch;
  }
  void note_tensor_peak() {
    const size_t cur = tensor_bytes();
    if (cur <= usage_.tensor_peak) return;
    usage_.tensor_peak = cur;
    usage_.at_peak = usage_.by_phase;
  }

  static size_t round_size(size_t n) {
    if (n < kMinBlockSize) return kMinBlockSize;
    return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
  }
  static size_t segment_size(size_t size) {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return kLargeBuffer;
    return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
  }
  template <typename F>
  void for_types(bool small, F f) {
    f(static_cast<size_t>(StatType::AGGREGATE));
    f(static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL));
  }
  template <typename F>
  void each_stat(F f) {
    for (auto* arr : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                      &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                      &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
      for (auto& s : *arr) f(s);
    }
    f(stats_.oversize_allocations);
    f(stats_.oversize_segments);
  }

  // Small blocks freed and reallocated at the same size (the steady state of eager loops)
  // skip splitting and merging: a freed small block waits in a short list for its exact
  // size and stream. Parked blocks merge back (and become releasable) in release_cached.
  static constexpr size_t kParkedPerSize = 64;

  bool park(Block* b) {
    if (!b->small) return false;
    auto& list = parked_[b->size / kMinBlockSize];
    if (list.size() >= kParkedPerSize) return false;
    b->parked = true;
    list.push_back(b);
    count_inactive_split(b, true);
    return true;
  }

  Block* unpark(size_t size, c10::StreamId stream) {
    auto it = parked_.find(size / kMinBlockSize);
    if (it == parked_.end() || it->second.empty() || it->second.back()->stream != stream) return nullptr;
    Block* b = it->second.back();
    it->second.pop_back();
    b->parked = false;
    count_inactive_split(b, false);
    return b;
  }

  void unpark_all() {
    for (auto& [cls, list] : parked_) {
      for (Block* b : list) {
        b->parked = false;
        count_inactive_split(b, false);
        merge_and_cache(b);
      }
      list.clear();
    }
  }

  void count_inactive_split(Block* b, bool add) {
    if (!(b->prev || b->next) || b->inactive_split_counted == add) return;
    b->inactive_split_counted = add;
    for_types(b->small, [&](size_t t) {
      if (add) {
        stats_.inactive_split[t].increase(1);
        stats_.inactive_split_bytes[t].increase(b->size);
      } else {
        stats_.inactive_split[t].decrease(1);
        stats_.inactive_split_bytes[t].decrease(b->size);
      }
    });
  }

  void take_from_pool(Block* b) {
    (b->small ? small_free_ : large_free_).erase(b);
    if (b->inactive_split_counted) {
      b->inactive_split_counted = false;
      for_types(b->small, [&](size_t t) {
        stats_.inactive_split[t].decrease(1);
        stats_.inactive_split_bytes[t].decrease(b->size);
      });
    }
  }
  void put_in_pool(Block* b) {
    (b->small ? small_free_ : large_free_).insert(b);
    if (b->prev || b->next) {
      b->inactive_split_counted = true;
      for_types(b->small, [&](size_t t) {
        stats_.inactive_split[t].increase(1);
        stats_.inactive_split_bytes[t].increase(b->size);
      });
    }
  }

  Block* new_segment(size_t size, bool small, c10::StreamId stream, size_t requested) {
    const size_t seg = segment_size(size);
    void* ptr = nullptr;
    nsimError err = nsimMalloc(device_, seg, &ptr);
    if (err == NSIM_ERROR_OUT_OF_MEMORY) {
      stats_.num_alloc_retries += 1;
      release_cached();
      err = nsimMalloc(device_, seg, &ptr);
    }
    if (err == NSIM_ERROR_OUT_OF_MEMORY) {
      stats_.num_ooms += 1;
      const std::string sim_msg = nsimGetLastErrorMessage();
      size_t free_b = 0, total_b = 0;
      nsimMemGetInfo(device_, &free_b, &total_b);
      const auto agg = static_cast<size_t>(StatType::AGGREGATE);
      const size_t allocated = stats_.allocated_bytes[agg].current;
      const size_t reserved = stats_.reserved_bytes[agg].current;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "Neuron out of memory. Tried to allocate ",
                       bytes_str(requested), " (", requested, " bytes). neuron:",
                       static_cast<int>(device_), " has a total capacity of ", bytes_str(total_b),
                       " of which ", bytes_str(free_b), " is free. Of the allocated memory ",
                       bytes_str(allocated), " is allocated by PyTorch, and ",
                       bytes_str(reserved - allocated),
                       " is reserved by PyTorch but unallocated. Free tensors (del, or let them "
                       "go out of scope) and call torch.neuron.empty_cache(); the simulated "
                       "capacity per core is set by NEURON_SIM_HBM_CAPACITY. (",
                       sim_msg, ")");
    }
    NEURON_CHECK(err);
    stats_.num_device_alloc += 1;
    for_types(small, [&](size_t t) {
      stats_.segment[t].increase(1);
      stats_.reserved_bytes[t].increase(seg);
    });
    auto* b = new Block{device_, stream, seg, 0, static_cast<char*>(ptr), small};
    return b;
  }

  Block* maybe_split(Block* b, size_t size) {
    const size_t remaining = b->size - size;
    const bool split = b->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
    if (!split) return b;
    auto* rest = new Block{b->device, b->stream, remaining, 0, b->ptr + size, b->small};
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    put_in_pool(rest);
    return b;
  }

  void merge_and_cache(Block* b) {
    for (Block* n : {b->prev, b->next}) {
      if (!n || n->allocated || n->parked || !n->stream_uses.empty()) continue;
      take_from_pool(n);
      if (n == b->prev) {
        b->ptr = n->ptr;
        b->prev = n->prev;
        if (b->prev) b->prev->next = b;
      } else {
        b->next = n->next;
        if (b->next) b->next->prev = b;
      }
      b->size += n->size;
      delete n;
    }
    put_in_pool(b);
  }

  void release_cached() {
    unpark_all();
    for (auto* pool : {&small_free_, &large_free_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev || b->next) {
          ++it;
          continue;
        }
        it = pool->erase(it);
        nsimFree(b->ptr);
        stats_.num_device_free += 1;
        for_types(b->small, [&](size_t t) {
          stats_.segment[t].decrease(1);
          stats_.reserved_bytes[t].decrease(b->size);
        });
        delete b;
      }
    }
  }

  c10::DeviceIndex device_;
  std::mutex mutex_;
  std::set<Block*, BlockLess> small_free_, large_free_;
  std::unordered_map<void*, Block*> live_;
  std::unordered_map<size_t, std::vector<Block*>> parked_;  // size / kMinBlockSize -> blocks
  DeviceStats stats_;
  Usage usage_;
};

std::vector<std::unique_ptr<DeviceCache>>& caches() {
  static std::vector<std::unique_ptr<DeviceCache>> c = [] {
    std::vector<std::unique_ptr<DeviceCache>> v;
    for (int i = 0; i < device_count(); ++i) v.push_back(std::make_unique<DeviceCache>(i));
    return v;
  }();
  return c;
}

DeviceCache& cache(c10::DeviceIndex d) {
  check_device_index(d);
  return *caches()[d];
}

void log_alloc(const Block* b, c10::DeviceIndex device, c10::StreamId stream) {
  sanitizer_log(SanitizerEvent{SanitizerEventKind::Alloc, reinterpret_cast<uintptr_t>(b->ptr),
                               b->size, device, stream, {}});
}

void free_device_ptr(void* ptr) {
  // In a forked child the block is the parent's: the child's copy of the cache stays as it is.
  if (!ptr || C10_UNLIKELY(in_bad_fork())) return;
  if (C10_UNLIKELY(valueless::any())) valueless::forget(ptr);
  // The address range says which device's cache owns the block (no runtime lock).
  const int device = nsimDeviceOfUnchecked(ptr);
  if (device >= 0 && device < static_cast<int>(caches().size())) {
    if (C10_UNLIKELY(sanitizing())) {
      SanitizerEvent freed{};
      if (caches()[device]->free(ptr, &freed)) {
        sanitizer_log(std::move(freed));
        return;
      }
    } else if (caches()[device]->free(ptr)) {
      return;
    }
  }
  TORCH_WARN("neuron: freeing a pointer the caching allocator does not own: ", ptr);
}

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const auto device = current_device();
    if (n == 0) {
      return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, device));
    }
    const c10::StreamId stream = current_stream(device).id();
    Block* b = cache(device).malloc(n, stream);
    if (C10_UNLIKELY(sanitizing())) log_alloc(b, device, stream);
    return c10::DataPtr(b->ptr, b->ptr, &free_device_ptr,
                        c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_device_ptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    NEURON_CHECK(nsimMemcpy(dest, src, count, NSIM_MEMCPY_DEVICE_TO_DEVICE));
  }
  bool initialized() override { return device_count() > 0; }
  void emptyCache(c10::MempoolId_t) override {
    for (auto& c : caches()) c->empty_cache();
    // Returning memory to the device synchronises it, as cudaFree does.
    if (C10_UNLIKELY(sanitizing())) {
      for (int d = 0; d < static_cast<int>(caches().size()); ++d) {
        sanitizer_log(SanitizerEvent{SanitizerEventKind::DeviceSync, 0, 0, d, 0, {}});
      }
    }
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (!ptr.get()) return;
    if (cache(stream.device_index()).record_stream(ptr.get(), stream.id()) &&
        C10_UNLIKELY(sanitizing())) {
      sanitizer_log(SanitizerEvent{SanitizerEventKind::RecordStream,
                                   reinterpret_cast<uintptr_t>(ptr.get()), 0,
                                   stream.device_index(), stream.id(), {}});
    }
  }
  DeviceStats getDeviceStats(c10::DeviceIndex device) override { return cache(device).stats(); }
  void resetAccumulatedStats(c10::DeviceIndex device) override { cache(device).reset_accumulated(); }
  void resetPeakStats(c10::DeviceIndex device) override { cache(device).reset_peak(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    size_t free_b = 0, total_b = 0;
    NEURON_CHECK(nsimMemGetInfo(device, &free_b, &total_b));
    return {free_b, total_b};
  }
};

NeuronDeviceAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator)

}  // namespace

c10::DeviceAllocator* device_allocator() { return &g_allocator; }

void record_stream(const c10::DataPtr& ptr, c10::Stream stream) {
  g_allocator.recordStream(ptr, stream);
}

void* raw_alloc(c10::DeviceIndex device, size_t nbytes, bool scratch) {
  const c10::StreamId stream = current_stream(device).id();
  Block* b = cache(device).malloc(std::max<size_t>(nbytes, 1), stream, scratch);
  if (C10_UNLIKELY(sanitizing())) log_alloc(b, device, stream);
  return b->ptr;
}

void raw_free(void* device_ptr) { free_device_ptr(device_ptr); }

void set_allocation_phase(AllocationPhase phase) { g_phase.store(static_cast<int>(phase)); }
AllocationPhase allocation_phase() { return static_cast<AllocationPhase>(g_phase.load()); }

Usage usage(c10::DeviceIndex device) { return cache(device).usage(); }

c10::DataPtr adopt_raw(void* device_ptr, c10::DeviceIndex device) {
  cache(device).adopt(device_ptr);
  return c10::DataPtr(device_ptr, device_ptr, &free_device_ptr,
                      c10::Device(c10::DeviceType::PrivateUse1, device));
}

}  // namespace torch_neuron
