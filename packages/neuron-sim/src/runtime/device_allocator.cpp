#include "device_allocator.h"

#include <algorithm>

#include "neuron_sim/neuron_sim.h"

namespace nsim {

DeviceAllocator::DeviceAllocator(uint64_t capacity) : capacity_(capacity) {
  insert_free(0, capacity);
}

void DeviceAllocator::insert_free(uint64_t offset, uint64_t size) {
  free_by_addr_.emplace(offset, size);
  free_by_size_.emplace(size, offset);
}

void DeviceAllocator::erase_free(std::map<uint64_t, uint64_t>::iterator it) {
  auto range = free_by_size_.equal_range(it->second);
  for (auto s = range.first; s != range.second; ++s) {
    if (s->second == it->first) {
      free_by_size_.erase(s);
      break;
    }
  }
  free_by_addr_.erase(it);
}

bool DeviceAllocator::allocate(uint64_t size, Block* out) {
  // Caller guarantees size <= capacity, so the round-up cannot overflow.
  const uint64_t reserved = (size + NSIM_ALIGNMENT - 1) & ~uint64_t(NSIM_ALIGNMENT - 1);
  std::lock_guard<std::mutex> lock(mu_);
  auto fit = free_by_size_.lower_bound(reserved);
  if (fit == free_by_size_.end()) return false;
  const uint64_t offset = fit->second, block_size = fit->first;
  free_by_size_.erase(fit);
  free_by_addr_.erase(offset);
  if (block_size > reserved) insert_free(offset + reserved, block_size - reserved);
  Block b{offset, size, reserved};
  live_.emplace(offset, b);
  in_use_ += reserved;
  *out = b;
  return true;
}

DeviceAllocator::FreeStatus DeviceAllocator::release(uint64_t offset, Block* block) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(offset);
  if (it == live_.end()) {
    if (find_locked(offset, block)) return FreeStatus::kInterior;
    for (size_t i = 0; i < recent_count_; ++i) {
      if (recent_frees_[i] == offset) return FreeStatus::kAlreadyFreed;
    }
    return FreeStatus::kUnallocated;
  }
  *block = it->second;
  live_.erase(it);
  in_use_ -= block->reserved;
  recent_frees_[recent_next_] = offset;
  recent_next_ = (recent_next_ + 1) % kRecentFrees;
  recent_count_ = std::min(recent_count_ + 1, kRecentFrees);

  uint64_t start = offset, size = block->reserved;
  auto next = free_by_addr_.lower_bound(start);
  if (next != free_by_addr_.end() && next->first == start + size) {
    size += next->second;
    erase_free(next);
  }
  auto prev = free_by_addr_.lower_bound(start);
  if (prev != free_by_addr_.begin()) {
    --prev;
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      erase_free(prev);
    }
  }
  insert_free(start, size);
  return FreeStatus::kFreed;
}

bool DeviceAllocator::find_locked(uint64_t offset, Block* out) const {
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return false;
  --it;
  const Block& b = it->second;
  if (offset >= b.offset + std::max<uint64_t>(b.size, 1)) return false;
  *out = b;
  return true;
}

bool DeviceAllocator::find(uint64_t offset, Block* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return find_locked(offset, out);
}

bool DeviceAllocator::try_find(uint64_t offset, Block* out, bool* busy) {
  if (!mu_.try_lock()) {
    *busy = true;
    return false;
  }
  *busy = false;
  bool found = find_locked(offset, out);
  mu_.unlock();
  return found;
}

DeviceAllocator::Stats DeviceAllocator::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.capacity = capacity_;
  s.in_use = in_use_;
  s.largest_free = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  return s;
}

}  // namespace nsim
