// Recursive-doubling all-reduce over shared memory (see shm_algorithms.h). Latency-bound
// messages: log2(n) pairwise steps instead of a barrier over all n ranks per step.
#include <algorithm>
#include <cstring>

#include "reduce.h"
#include "shm_algorithms.h"

namespace neuron_ccl {

size_t recursive_doubling_staging_bytes(size_t count, DataType dt, int ranks) {
  int steps = 0;
  while ((1 << steps) < ranks) ++steps;
  return size_t(std::max(steps, 1)) * count * accum_size(dt);
}

void recursive_doubling_all_reduce(ShmPeers& p, size_t count, DataType dt, const Reduction& red,
                                   bool in_place) {
  const int n = p.size(), r = p.rank();
  const size_t es = dtype_size(dt), as = accum_size(dt), bytes = count * es, stage = count * as;
  char* out = p.buffer(r, ShmPeers::kRecv, bytes);
  const char* in = p.buffer(r, ShmPeers::kSend, bytes);
  if (n == 1) {
    const void* ins[1] = {in};
    reduce_buffers(out, ins, 1, count, dt, red, 1);
    return;
  }
  int steps = 0;
  while ((1 << steps) < n) ++steps;
  // Stage k (1..steps) of each rank lives at staging offset (k-1)*stage, written once per
  // operation, so a partner still reading stage k-1 is never overwritten.
  char* mine = p.buffer(r, ShmPeers::kStaging, stage * steps);
  for (int k = 1; k <= steps; ++k) {
    const int partner = r ^ (1 << (k - 1));
    if (k > 1) p.wait_progress(partner, uint64_t(k - 1), "recursive doubling: waiting for the partner");
    const bool acc = k > 1;
    const char* own = acc ? mine + (k - 2) * stage : in;
    const char* other = acc ? p.buffer(partner, ShmPeers::kStaging, stage * steps) + (k - 2) * stage
                            : p.buffer(partner, ShmPeers::kSend, bytes);
    const bool last = k == steps;
    // In place, the last step must not overwrite our input before the first partner read it:
    // finish into staging and copy once that partner is past step 1.
    char* dst = last && !in_place ? out : mine + (k - 1) * stage;
    const char* a = r < partner ? own : other;
    const char* b = r < partner ? other : own;
    reduce_pair(dst, a, acc, b, acc, count, dt, red, n, last);
    p.publish_progress(uint64_t(k));
  }
  const int first_partner = r ^ 1;
  // The first partner reads our input; later partners read staging that the next operation
  // only rewrites after its entry barrier.
  p.wait_progress(first_partner, 1, "recursive doubling: waiting for the partner to read our input");
  if (in_place) std::memcpy(out, mine + (steps - 1) * stage, bytes);
}

}  // namespace neuron_ccl
