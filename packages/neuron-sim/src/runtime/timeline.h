// Per-device ring buffer of timeline records, preallocated (lazily backed) at init so that
// recording a launch allocates nothing.
#ifndef NEURON_SIM_RUNTIME_TIMELINE_H
#define NEURON_SIM_RUNTIME_TIMELINE_H

#include <cstddef>
#include <cstdint>

#include "neuron_sim/neuron_sim.h"

namespace nsim {

class Timeline {
 public:
  Timeline() = default;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  ~Timeline();

  bool allocate(uint64_t capacity);
  // Callers hold the owning device's mutex for every method below.
  void push(const nsimTimelineRecord& r) {
    ring_[head_] = r;
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    if (count_ < capacity_) ++count_;
  }
  size_t count() const { return count_; }
  size_t copy_out(nsimTimelineRecord* out, size_t capacity) const;  // oldest first
  void clear() { head_ = count_ = 0; }

 private:
  nsimTimelineRecord* ring_ = nullptr;
  size_t capacity_ = 0, head_ = 0, count_ = 0;
};

}  // namespace nsim

#endif
