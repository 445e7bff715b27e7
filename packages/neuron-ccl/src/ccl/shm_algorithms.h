// All-reduce algorithms of the shared-memory transport that exchange data between pairs of
// ranks step by step (the direct oneshot / twoshot algorithms live in shm_collectives.cpp).
//
// They pull: a rank reads its peers' published buffers in place (single copy) and waits only
// for the peers whose data it needs, through per-rank progress counters, so consecutive
// steps overlap across ranks instead of meeting at a global barrier.
#pragma once

#include <cstddef>
#include <cstdint>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {

// What an algorithm sees of the communicator during one operation (after the descriptors were
// published and checked).
class ShmPeers {
 public:
  enum Which { kSend = 0, kRecv = 1, kStaging = 2 };
  virtual ~ShmPeers() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Host address of buffer `which` of rank r for this operation (r == rank(): our own).
  virtual char* buffer(int r, Which which, size_t bytes) = 0;
  // Progress counters: each rank counts finished pieces; values are relative to the start of
  // this operation (every rank runs the same pieces, so the counters start out equal).
  virtual void publish_progress(uint64_t done) = 0;
  virtual void wait_progress(int r, uint64_t done, const char* what) = 0;
};

// Ring all-reduce: reduce-scatter then all-gather, n-1 steps each, every step split into
// slices of `slice_bytes` that are handed on as soon as they are done (pipelined). Partial
// results travel in the accumulation type (float32 for 16-bit floats) through staging memory
// of ring_staging_bytes() (count * accum_size(dt) with 3+ ranks). `in_place`: the send and
// recv buffers overlap.
void ring_all_reduce(ShmPeers& p, size_t count, DataType dt, const Reduction& red, bool in_place,
                     size_t slice_bytes);
size_t ring_staging_bytes(size_t count, DataType dt, int ranks, size_t slice_bytes);

// Recursive doubling for power-of-two rank counts: log2(n) steps; at step k a rank combines its
// value with that of the rank whose number differs in bit k. Both sides combine lower rank
// first, so every rank ends with identical bits. Staging: log2(n) * count * accum_size(dt).
void recursive_doubling_all_reduce(ShmPeers& p, size_t count, DataType dt, const Reduction& red,
                                   bool in_place);
size_t recursive_doubling_staging_bytes(size_t count, DataType dt, int ranks);

inline bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace neuron_ccl
