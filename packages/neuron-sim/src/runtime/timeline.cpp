#include "timeline.h"

#include <sys/mman.h>

#include <algorithm>

namespace nsim {

Timeline::~Timeline() {
  if (ring_) munmap(ring_, capacity_ * sizeof(nsimTimelineRecord));
}

bool Timeline::allocate(uint64_t capacity) {
  // Anonymous mapping: pages are committed only as records are written.
  void* p = mmap(nullptr, capacity * sizeof(nsimTimelineRecord), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  ring_ = static_cast<nsimTimelineRecord*>(p);
  capacity_ = capacity;
  head_ = count_ = 0;
  return true;
}

size_t Timeline::copy_out(nsimTimelineRecord* out, size_t capacity) const {
  const size_t n = std::min(capacity, count_);
  size_t idx = (head_ + capacity_ - count_) % capacity_;
  for (size_t i = 0; i < n; ++i) {
    out[i] = ring_[idx];
    idx = idx + 1 == capacity_ ? 0 : idx + 1;
  }
  return n;
}

}  // namespace nsim
