// Ring all-reduce over shared memory (see shm_algorithms.h).
//
// Rank r, left = r-1, right = r+1 (mod n); the buffer is cut into n blocks, each into slices.
// Reduce-scatter step s (0..n-2): r combines its input of block (r-s-1) with what left holds
// for that block (left's input at s = 0, left's partial from step s-1 after), so after n-1
// steps r holds the full result of block r+1, written to its output (scaled, in the dtype).
// All-gather step t (0..n-2): r copies block (r-t) from left's output, which left finished in
// its previous step. Every block is reduced by exactly one rank, so all ranks hold equal bits.
//
// A slice goes through all 2(n-1) steps before the next one starts (slice-major): every rank
// works on the same step at the same time and reads what its left neighbour wrote a moment
// ago, from the shared cache rather than DRAM (2 ranks, 64-256 MiB: 20-30% faster than
// step-major order on the reference VM). A small circular staging window that would also
// avoid the read-for-ownership of the outputs measured 20-40% slower (extra copy, extra waits).
#include <algorithm>
#include <cstring>

#include "reduce.h"
#include "shm_algorithms.h"

namespace neuron_ccl {
namespace {
constexpr size_t kRingStreamMinBytes = size_t(32) << 20;  // the reference VM's L3
}  // namespace

size_t ring_staging_bytes(size_t count, DataType dt, int ranks, size_t slice_bytes) {
  // Partials of every block but the final one; with 2 ranks there are none.
  return ranks > 2 ? count * accum_size(dt) : 0;
}

void ring_all_reduce(ShmPeers& p, size_t count, DataType dt, const Reduction& red, bool in_place,
                     size_t slice_bytes) {
  const int n = p.size(), r = p.rank();
  const size_t es = dtype_size(dt), as = accum_size(dt), bytes = count * es;
  char* out = p.buffer(r, ShmPeers::kRecv, bytes);
  const char* in = p.buffer(r, ShmPeers::kSend, bytes);
  if (n == 1) {
    const void* ins[1] = {in};
    reduce_buffers(out, ins, 1, count, dt, red, 1);
    return;
  }
  const int left = (r + n - 1) % n, right = (r + 1) % n;
  const size_t stage_bytes = ring_staging_bytes(count, dt, n, slice_bytes);
  const char* left_in = p.buffer(left, ShmPeers::kSend, bytes);
  const char* left_out = p.buffer(left, ShmPeers::kRecv, bytes);
  const char* left_acc = stage_bytes ? p.buffer(left, ShmPeers::kStaging, stage_bytes) : nullptr;
  char* acc = stage_bytes ? p.buffer(r, ShmPeers::kStaging, stage_bytes) : nullptr;

  const size_t per = (count + n - 1) / n;  // block length; the last blocks may be short or empty
  const size_t slice = std::max<size_t>(1, slice_bytes / as);
  const size_t ns = std::max<size_t>(1, (per + slice - 1) / slice);  // slices per block
  const int steps = 2 * (n - 1);
  // The last all-gather copy is forwarded by nobody; beyond the last-level cache it goes to
  // DRAM anyway, and non-temporal stores save the read-for-ownership of each line.
  const bool stream_last = bytes >= kRingStreamMinBytes;
  auto block_range = [&](int c, size_t j, size_t* off, size_t* len) {
    const size_t b0 = std::min(count, size_t(c) * per), b1 = std::min(count, b0 + per);
    const size_t s0 = std::min(b1, b0 + j * slice), s1 = std::min(b1, s0 + slice);
    *off = s0;
    *len = s1 - s0;
  };
  // Progress counts (slice, step) units in slice-major order: unit (k, j) is j*steps + k, and
  // step k of slice j needs only left's step k-1 of slice j.
  for (size_t j = 0; j < ns; ++j) {
    const uint64_t unit0 = uint64_t(j) * steps;
    for (int k = 0; k < steps; ++k) {
      if (k > 0) p.wait_progress(left, unit0 + k, "ring: waiting for the left neighbour");
      size_t off, len;
      if (k < n - 1) {
        const int s = k, c = ((r - s - 1) % n + n) % n;
        block_range(c, j, &off, &len);
        if (len) {
          const bool last = s == n - 2;
          const void* prev = s == 0 ? static_cast<const void*>(left_in + off * es) : left_acc + off * as;
          void* dst = last ? static_cast<void*>(out + off * es) : acc + off * as;
          reduce_pair(dst, in + off * es, false, prev, s != 0, len, dt, red, n, last);
        }
      } else {
        const int t = k - (n - 1), c = ((r - t) % n + n) % n;
        block_range(c, j, &off, &len);
        // In place, block r of our output is right's step-0 input: wait until right read it.
        if (t == 0 && in_place) p.wait_progress(right, unit0 + 1, "ring: waiting for the right neighbour");
        if (len && stream_last && t == n - 2) {
          stream_bytes(out + off * es, left_out + off * es, len * es);
          store_fence();  // visible before the progress counter says so
        } else if (len) {
          std::memcpy(out + off * es, left_out + off * es, len * es);
        }
      }
      p.publish_progress(unit0 + k + 1);
    }
  }
  // Right reads our input, partials and output until its last unit; it must be done before
  // the caller may reuse them.
  p.wait_progress(right, uint64_t(steps) * ns, "ring: waiting for the right neighbour to finish");
}

}  // namespace neuron_ccl
