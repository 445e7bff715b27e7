#include "tcp_collectives.h"

#include <algorithm>
#include <cstring>

#include "reduce.h"
#include "shm_algorithms.h"

namespace neuron_ccl {

void TcpCollectives::send_to(int peer, const FrameHeader& op, int step, const char* data, size_t bytes,
                             const char* what) {
  FrameHeader h = op;
  h.kind = FrameHeader::kCollective;
  h.tag = step;
  t_.send(peer, h, data, bytes, what);
}

const std::vector<char>& TcpCollectives::recv_from(int peer, const FrameHeader& op, int step, size_t bytes,
                                                   const char* what) {
  const FrameHeader h = t_.recv(peer, FrameHeader::kCollective, &rx_, what);
  if (h.seq != op.seq || h.op != op.op || h.dtype != op.dtype || h.count != op.count || h.root != op.root ||
      h.redop != op.redop) {
    const int lo = std::min(peer, rank_), hi = std::max(peer, rank_);
    const FrameHeader& dl = lo == rank_ ? op : h;
    const FrameHeader& dh = lo == rank_ ? h : op;
    throw Error(Error::kMismatch, "neuron_ccl: mismatched collectives: rank " + std::to_string(lo) + " called " +
                                      describe_(dl) + " while rank " + std::to_string(hi) + " called " +
                                      describe_(dh) +
                                      "; every rank must issue the same collectives in the same order with "
                                      "the same dtype and size");
  }
  if (h.tag != step || h.bytes != bytes) {
    throw Error(Error::kMismatch, "neuron_ccl: " + describe_(op) + ": rank " + std::to_string(peer) + " sent " +
                                      std::to_string(h.bytes) + " bytes in step " + std::to_string(h.tag) +
                                      " where rank " + std::to_string(rank_) + " expects " + std::to_string(bytes) +
                                      " in step " + std::to_string(step) + " (buffer sizes disagree between ranks)");
  }
  return rx_;
}

// Sends `sbytes` to `to` and receives `rbytes` from `from` in frames of at most slice_bytes_
// (bounded memory per frame; the receiver starts on a slice while the next one travels).
// `on_slice(offset, data, len)` consumes each received slice.
template <class OnSlice>
void TcpCollectives::exchange(const FrameHeader& op, int step, int to, const char* sdata, size_t sbytes, int from,
                              size_t rbytes, const char* what, OnSlice on_slice) {
  const size_t slice = std::max<size_t>(8, slice_bytes_ / 8 * 8);  // whole elements of any dtype
  // Each direction has its own frame count, derived from its own size (which the peer at the
  // other end derives from the same block): at least one frame, so empty blocks are checked too.
  const size_t fs = std::max<size_t>(1, (sbytes + slice - 1) / slice);
  const size_t fr = std::max<size_t>(1, (rbytes + slice - 1) / slice);
  for (size_t f = 0; f < std::max(fs, fr); ++f) {
    if (f < fs) {
      const size_t so = std::min(sbytes, f * slice);
      send_to(to, op, step, sdata + so, std::min(sbytes, so + slice) - so, what);
    }
    if (f < fr) {
      const size_t ro = std::min(rbytes, f * slice), rl = std::min(rbytes, ro + slice) - ro;
      const auto& got = recv_from(from, op, step, rl, what);
      if (rl) on_slice(ro, got.data(), rl);
    }
  }
}

void TcpCollectives::all_reduce(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                                const Reduction& red, const std::string& algo) {
  if (size_ == 1 || count == 0) {
    const void* ins[1] = {in};
    if (count) reduce_buffers(out, ins, 1, count, dt, red, 1);
    return;
  }
  if (algo == "rdouble") return recursive_doubling(op, in, out, count, dt, red);
  if (algo == "tree") return tree_all_reduce(op, in, out, count, dt, red);
  ring_all_reduce(op, in, out, count, dt, red);
}

// Binomial tree rooted at rank 0, for small messages on any rank count: 2*ceil(log2 n) steps
// where the ring needs 2(n-1) (recursive doubling needs a power of two). Up: at step k a rank
// whose lowest set bit is k sends its partial to rank - 2^k and is done climbing; a rank below
// it combines (own partial, child's partial) - lower rank first - in the accumulation type.
// The root finishes (scale, round) at its last combine; the result then flows down the same
// tree in the dtype, so every rank holds the root's bits. Whole buffers per frame.
void TcpCollectives::tree_all_reduce(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                                     const Reduction& red) {
  const int n = size_, r = rank_;
  const size_t es = dtype_size(dt), as = accum_size(dt);
  int steps = 0;
  while ((1 << steps) < n) ++steps;
  acc_.resize(count * as);
  bool have_acc = false;  // acc_ holds our partial (we received from a child), else `in` is it
  for (int k = 0; k < steps; ++k) {
    const int d = 1 << k;
    if (r & d) {
      send_to(r - d, op, k, have_acc ? acc_.data() : in, count * (have_acc ? as : es), "tree: sending up to the parent");
      break;
    }
    const int child = r + d;
    if (child >= n) continue;
    // The child combined something before (its own child child+1 exists) iff k > 0.
    const bool child_acc = k > 0 && child + 1 < n;
    const auto& got = recv_from(child, op, k, count * (child_acc ? as : es), "tree: receiving from a child");
    // The root's last child is the one at the highest step with a child (k == steps - 1).
    const bool finish = r == 0 && k == steps - 1;
    reduce_pair(finish ? static_cast<void*>(out) : acc_.data(), have_acc ? acc_.data() : in, have_acc, got.data(),
                child_acc, count, dt, red, n, finish);
    have_acc = true;
  }
  // Down: tags steps + k, k = the receiving child's lowest set bit.
  int top = steps;
  if (r != 0) {
    top = __builtin_ctz(unsigned(r));
    const auto& got = recv_from(r - (1 << top), op, steps + top, count * es, "tree: receiving the result from the parent");
    std::memcpy(out, got.data(), count * es);
  }
  for (int k = top - 1; k >= 0; --k)
    if (r + (1 << k) < n) send_to(r + (1 << k), op, steps + k, out, count * es, "tree: sending the result down");
}

// Push form of the ring (see ring.cpp for the pull form over shared memory): reduce-scatter
// step s sends our partial of block (r-s) right and combines left's partial of block (r-s-1)
// with our input, ending with the full block r+1; all-gather step t forwards block (r+1-t).
void TcpCollectives::ring_all_reduce(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                                     const Reduction& red) {
  const int n = size_, r = rank_, left = (r + n - 1) % n, right = (r + 1) % n;
  const size_t es = dtype_size(dt), as = accum_size(dt), per = (count + n - 1) / n;
  const size_t slice = std::max<size_t>(1, slice_bytes_ / as);
  const size_t ns = std::max<size_t>(1, (per + slice - 1) / slice);
  acc_.resize(count * as);
  auto range = [&](int c, size_t j, size_t* off, size_t* len) {
    const size_t b0 = std::min(count, size_t(c) * per), b1 = std::min(count, b0 + per);
    const size_t s0 = std::min(b1, b0 + j * slice), s1 = std::min(b1, s0 + slice);
    *off = s0;
    *len = s1 - s0;
  };
  int step = 0;
  for (int s = 0; s < n - 1; ++s, ++step) {
    const int cs = ((r - s) % n + n) % n, cr = ((r - s - 1) % n + n) % n;
    for (size_t j = 0; j < ns; ++j) {
      size_t off, len;
      range(cs, j, &off, &len);
      // Step 0 sends our input as is; later steps send the partial we made in the previous one.
      if (s == 0) send_to(right, op, step, in + off * es, len * es, "ring reduce-scatter: sending right");
      else send_to(right, op, step, acc_.data() + off * as, len * as, "ring reduce-scatter: sending right");
      range(cr, j, &off, &len);
      const bool prev_acc = s != 0, last = s == n - 2;
      const auto& got = recv_from(left, op, step, len * (prev_acc ? as : es), "ring reduce-scatter: receiving from the left");
      void* dst = last ? static_cast<void*>(out + off * es) : acc_.data() + off * as;
      if (len) reduce_pair(dst, in + off * es, false, got.data(), prev_acc, len, dt, red, n, last);
    }
  }
  for (int t = 0; t < n - 1; ++t, ++step) {
    const int cs = ((r + 1 - t) % n + n) % n, cr = ((r - t) % n + n) % n;
    for (size_t j = 0; j < ns; ++j) {
      size_t off, len;
      range(cs, j, &off, &len);
      send_to(right, op, step, out + off * es, len * es, "ring all-gather: sending right");
      range(cr, j, &off, &len);
      const auto& got = recv_from(left, op, step, len * es, "ring all-gather: receiving from the left");
      if (len) std::memcpy(out + off * es, got.data(), len * es);
    }
  }
}

void TcpCollectives::recursive_doubling(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                                        const Reduction& red) {
  const size_t es = dtype_size(dt), as = accum_size(dt);
  acc_.resize(count * as);
  int steps = 0;
  while ((1 << steps) < size_) ++steps;
  for (int k = 1; k <= steps; ++k) {
    const int partner = rank_ ^ (1 << (k - 1));
    const bool acc = k > 1, last = k == steps;
    const char* own = acc ? acc_.data() : in;
    const size_t b = count * (acc ? as : es);
    send_to(partner, op, k, own, b, "recursive doubling: sending to the partner");
    const auto& got = recv_from(partner, op, k, b, "recursive doubling: receiving from the partner");
    // Lower rank first on both sides: partners compute identical bits.
    const char* a = rank_ < partner ? own : got.data();
    const char* c = rank_ < partner ? got.data() : own;
    reduce_pair(last ? static_cast<void*>(out) : acc_.data(), a, acc, c, acc, count, dt, red, size_, last);
  }
}

// Rooted operations in which one side only sends end with an empty acknowledgement the other
// way, so every rank receives at least one frame of the call: a rank that called something
// else is then detected (and named) on every rank, not only on the receiving ones.
void TcpCollectives::acknowledge(const FrameHeader& op, int root, bool root_waits) {
  for (int q = 0; q < size_; ++q) {
    if (q == root || (rank_ != root && q != rank_)) continue;
    const int peer = rank_ == root ? q : root;
    if ((rank_ == root) == root_waits) recv_from(peer, op, kAckStep, 0, "waiting for the acknowledgement");
    else send_to(peer, op, kAckStep, nullptr, 0, "acknowledging");
  }
}

void TcpCollectives::broadcast(const FrameHeader& op, char* buf, size_t bytes, int root) {
  const size_t slice = std::max<size_t>(1, slice_bytes_);
  const size_t ns = std::max<size_t>(1, (bytes + slice - 1) / slice);
  for (size_t j = 0; j < ns; ++j) {
    const size_t off = std::min(bytes, j * slice), len = std::min(bytes, off + slice) - off;
    if (rank_ == root) {
      for (int i = 1; i < size_; ++i) send_to((root + i) % size_, op, int(j), buf + off, len, "broadcast: sending");
    } else {
      const auto& got = recv_from(root, op, int(j), len, "broadcast: receiving from the root");
      if (len) std::memcpy(buf + off, got.data(), len);
    }
  }
  acknowledge(op, root, true);
}

// Ring: step t forwards block (r-t) right (our own input at t = 0) and receives block (r-t-1).
void TcpCollectives::all_gather_v(const FrameHeader& op, const char* in, size_t in_bytes,
                                  const std::vector<char*>& out, const std::vector<size_t>& out_bytes) {
  const int n = size_, r = rank_;
  if (out_bytes[r] != in_bytes) {
    throw Error(Error::kInvalidArgument, "neuron_ccl: all_gather on rank " + std::to_string(r) + ": the input has " +
                                             std::to_string(in_bytes) + " bytes but output block " +
                                             std::to_string(r) + " has " + std::to_string(out_bytes[r]));
  }
  if (in_bytes && out[r] != in) std::memmove(out[r], in, in_bytes);
  for (int t = 0; t < n - 1; ++t) {
    const int cs = ((r - t) % n + n) % n, cr = ((r - t - 1) % n + n) % n;
    exchange(op, t, (r + 1) % n, out[cs], out_bytes[cs], (r + n - 1) % n, out_bytes[cr], "ring all-gather",
             [&](size_t off, const char* data, size_t len) { std::memcpy(out[cr] + off, data, len); });
  }
}

// Ring: step s sends our partial of block (r-s-1) right (input at s = 0) and combines left's
// partial of block (r-s-2) with our input; the last step completes block r.
void TcpCollectives::reduce_scatter(const FrameHeader& op, const std::vector<const char*>& in, char* out,
                                    size_t count, DataType dt, const Reduction& red) {
  const int n = size_, r = rank_;
  const size_t es = dtype_size(dt), as = accum_size(dt);
  if (n == 1) {
    const void* ins[1] = {in[0]};
    if (count) reduce_buffers(out, ins, 1, count, dt, red, 1);
    return;
  }
  acc_.resize(count * as);
  tmp_.resize(count * as);
  for (int s = 0; s < n - 1; ++s) {
    const int cs = ((r - s - 1) % n + n) % n, cr = ((r - s - 2) % n + n) % n;
    const bool prev_acc = s != 0, last = s == n - 2;
    const size_t rs = prev_acc ? as : es;  // element size of what arrives
    // acc_ is being sent; the new partial goes to tmp_ and becomes acc_ for the next step.
    // Slices are whole elements (both sides use the same slice_bytes_ and element size).
    const char* sdata = s == 0 ? in[cs] : acc_.data();
    exchange(op, s, (r + 1) % n, sdata, count * rs, (r + n - 1) % n, count * rs, "ring reduce-scatter",
             [&](size_t off, const char* data, size_t len) {
               const size_t e0 = off / rs, m = len / rs;
               void* dst = last ? static_cast<void*>(out + e0 * es) : tmp_.data() + e0 * as;
               reduce_pair(dst, in[cr] + e0 * es, false, data, prev_acc, m, dt, red, n, last);
             });
    std::swap(acc_, tmp_);
  }
}

void TcpCollectives::all_to_all_v(const FrameHeader& op, const std::vector<const char*>& in,
                                  const std::vector<size_t>& in_bytes, const std::vector<char*>& out,
                                  const std::vector<size_t>& out_bytes, bool stage) {
  const int n = size_, r = rank_;
  // In place, a block we receive may overlap one we have yet to send: stage what arrives.
  std::vector<std::vector<char>> staged(stage ? n : 0);
  auto land = [&](int q, size_t off, const char* src, size_t len) {
    if (stage) {
      staged[q].resize(out_bytes[q]);
      std::memcpy(staged[q].data() + off, src, len);
    } else {
      std::memmove(out[q] + off, src, len);
    }
  };
  if (out_bytes[r]) land(r, 0, in[r], std::min(out_bytes[r], in_bytes[r]));
  for (int i = 1; i < n; ++i) {
    const int to = (r + i) % n, from = (r + n - i) % n;
    exchange(op, i, to, in[to], in_bytes[to], from, out_bytes[from], "all_to_all",
             [&](size_t off, const char* data, size_t len) { land(from, off, data, len); });
  }
  if (stage)
    for (int q = 0; q < n; ++q)
      if (out_bytes[q]) std::memcpy(out[q], staged[q].data(), out_bytes[q]);
}

void TcpCollectives::gather(const FrameHeader& op, const char* in, size_t bytes, const std::vector<char*>& out,
                            int root) {
  if (rank_ != root) {
    send_to(root, op, 0, in, bytes, "gather: sending to the root");
  } else {
    if (bytes && out[root] != in) std::memmove(out[root], in, bytes);
    for (int q = 0; q < size_; ++q) {
      if (q == root) continue;
      const auto& got = recv_from(q, op, 0, bytes, "gather: receiving");
      if (bytes) std::memcpy(out[q], got.data(), bytes);
    }
  }
  acknowledge(op, root, false);
}

void TcpCollectives::scatter(const FrameHeader& op, const std::vector<const char*>& in, char* out, size_t bytes,
                             int root) {
  if (rank_ != root) {
    const auto& got = recv_from(root, op, 0, bytes, "scatter: receiving from the root");
    if (bytes) std::memcpy(out, got.data(), bytes);
  } else {
    for (int q = 0; q < size_; ++q)
      if (q != root) send_to(q, op, 0, in[q], bytes, "scatter: sending");
    if (bytes && in[root] != out) std::memmove(out, in[root], bytes);
  }
  acknowledge(op, root, true);
}

// n-1 rounds around the ring: after round i a rank knows the i ranks before it have entered.
void TcpCollectives::barrier(const FrameHeader& op) {
  for (int i = 0; i < size_ - 1; ++i) {
    send_to((rank_ + 1) % size_, op, i, nullptr, 0, "barrier");
    recv_from((rank_ + size_ - 1) % size_, op, i, 0, "barrier");
  }
}

void TcpCollectives::send(const FrameHeader& msg, const char* buf, size_t bytes, int peer) {
  FrameHeader h = msg;
  h.kind = FrameHeader::kPointToPoint;
  t_.send(peer, h, buf, bytes, "send");
}

void TcpCollectives::recv(const FrameHeader& msg, char* buf, size_t bytes, int peer) {
  const FrameHeader h = t_.recv(peer, FrameHeader::kPointToPoint, &rx_, "recv: waiting for the matching send");
  if (h.tag != msg.tag || h.count != msg.count || h.dtype != msg.dtype || h.bytes != bytes) {
    throw Error(Error::kMismatch,
                "neuron_ccl: recv on rank " + std::to_string(rank_) + " from rank " + std::to_string(peer) +
                    " expected tag " + std::to_string(msg.tag) + ", " + std::to_string(msg.count) + " x " +
                    dtype_name(static_cast<DataType>(msg.dtype)) + " but the next message sent has tag " +
                    std::to_string(h.tag) + ", " + std::to_string(h.count) + " x " +
                    dtype_name(static_cast<DataType>(h.dtype)) + "; messages between two ranks arrive in order");
  }
  if (bytes) std::memcpy(buf, rx_.data(), bytes);
}

}  // namespace neuron_ccl
