#include "shm_collectives.h"

#include <algorithm>
#include <cstring>

#include "reduce.h"
#include "shm_algorithms.h"

namespace neuron_ccl {
namespace {

// Outputs from this size on are written with non-temporal stores when nothing reads them
// right back (they exceed the private caches; see copy_bytes in reduce.cpp).
constexpr size_t kStreamMinBytes = size_t(1) << 20;
// The direct all-reduce hands out chunks of this many bytes (of one input) from this size on:
// enough chunks to balance, few enough that claiming (one shared atomic each) is free.
constexpr size_t kClaimChunkBytes = size_t(1) << 20;
constexpr size_t kClaimMinBytes = size_t(4) << 20;

// The view of the transport the ring / recursive doubling work on.
class Peers : public ShmPeers {
 public:
  Peers(ShmTransport& t, int rank, int size) : t_(t), rank_(rank), size_(size), base_(t.progress()) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  char* buffer(int r, Which w, size_t bytes) override { return t_.peer(r, t_.slot(r)->main[w], bytes); }
  void publish_progress(uint64_t done) override {
    t_.progress() = base_ + done;
    t_.slot(rank_)->progress.store(t_.progress(), std::memory_order_release);
  }
  void wait_progress(int r, uint64_t done, const char* what) override {
    std::atomic<uint64_t>& p = t_.slot(r)->progress;
    const uint64_t target = base_ + done;
    t_.wait_until([&] { return p.load(std::memory_order_acquire) >= target; }, [&] { return std::vector<int>{r}; },
                  what);
  }

 private:
  ShmTransport& t_;
  int rank_, size_;
  uint64_t base_;
};

}  // namespace

void ShmCollectives::all_reduce(const OpDesc& d, const char* send, char* recv, const RemoteRef& sref,
                                const RemoteRef& rref, const RemoteRef& stage, size_t count, DataType dt,
                                const Reduction& red, const std::string& algo, size_t ring_slice) {
  const size_t es = dtype_size(dt), bytes = count * es;
  ShmSlot* s = t_.slot(rank_);
  s->main[0] = sref;
  s->main[1] = rref;
  s->main[2] = stage;
  t_.enter(d);
  if (algo == "ring" || algo == "rdouble") {
    if (count == 0) return t_.sync("leaving");
    const bool in_place = overlaps(send, bytes, recv, bytes);
    Peers peers(t_, rank_, size_);
    if (algo == "ring") {
      ring_all_reduce(peers, count, dt, red, in_place, ring_slice);
    } else {
      recursive_doubling_all_reduce(peers, count, dt, red, in_place);
    }
    return;
  }
  if (count == 0) return t_.sync("leaving");
  char* out = recv;
  const char* in_self = send;
  std::vector<const void*> ins(size_);
  if (algo == "oneshot") {
    for (int r = 0; r < size_; ++r) ins[r] = t_.peer(r, t_.slot(r)->main[0], bytes);
    // Peers read our send buffer until the second sync; reduce into scratch when the
    // result would overwrite it.
    const bool aliased = overlaps(out, bytes, in_self, bytes);
    char* dst = aliased ? scratch(bytes) : out;
    reduce_buffers(dst, ins.data(), size_, count, dt, red, size_);
    t_.sync("reduced");
    if (aliased) std::memcpy(out, dst, bytes);
    return;
  }
  // twoshot: every element is reduced once, over all inputs in rank order, and the result
  // is written straight into every rank's output (reduce-scatter and all-gather in one
  // pass, single copy). All ranks together read n*S and write n*S, the least an all-reduce
  // can move (the ceiling the benchmark derives). Small messages: rank r takes block r.
  // Large ones are cut into chunks that the ranks claim from a shared counter, so a rank
  // that the OS deschedules (more ranks than cores, a loaded host) leaves its share to the
  // others instead of stalling everyone; results are the same bits whoever reduces a chunk.
  // In place, out_q[chunk] is read only as in_q[chunk], by the one rank that claimed it,
  // and each element is read before it is overwritten.
  // Store kind per output: an output that is its rank's input (in place) gets plain stores
  // (its lines were just loaded, writing them back is all that is left); any other large
  // output is streamed (non-temporal: no read-for-ownership, no cache pollution).
  std::vector<char*> out_base(size_);
  std::vector<const char*> in_base(size_);
  std::vector<const void*> in_at(size_);
  std::vector<char> stream(size_);
  for (int r = 0; r < size_; ++r) {
    in_base[r] = t_.peer(r, t_.slot(r)->main[0], bytes);
    out_base[r] = t_.peer(r, t_.slot(r)->main[1], bytes);
    stream[r] = out_base[r] != in_base[r] && bytes >= kStreamMinBytes;
  }
  const bool fused = size_ == 2 && dt == DataType::kFloat32 && red.op == ReduceOp::kSum;
  constexpr size_t kSubBytes = 64 << 10;
  const size_t sub = std::max<size_t>(1, kSubBytes / es);
  auto reduce_range = [&](size_t off, size_t n) {
    if (fused && sum2_f32(reinterpret_cast<float*>(out_base[0] + off * es), stream[0],
                          reinterpret_cast<float*>(out_base[1] + off * es), stream[1],
                          reinterpret_cast<const float*>(in_base[0] + off * es),
                          reinterpret_cast<const float*>(in_base[1] + off * es), n))
      return;
    // Other dtypes and ops: reduce a cache-resident sub-block, then write it to every output.
    char* tmp = scratch(sub * es);
    for (size_t b = off; b < off + n; b += sub) {
      const size_t m = std::min(sub, off + n - b);
      for (int r = 0; r < size_; ++r) in_at[r] = in_base[r] + b * es;
      reduce_buffers(tmp, in_at.data(), size_, m, dt, red, size_);
      for (int i = 0; i < size_; ++i) {
        const int r = (rank_ + i) % size_;
        if (stream[r]) {
          stream_bytes(out_base[r] + b * es, tmp, m * es);
        } else {
          std::memcpy(out_base[r] + b * es, tmp, m * es);
        }
      }
    }
  };
  const size_t chunk = std::max<size_t>(1, kClaimChunkBytes / es);
  if (bytes < kClaimMinBytes) {
    const size_t per = (count + size_ - 1) / size_;
    const size_t off = std::min(count, per * size_t(rank_));
    reduce_range(off, std::min(count, off + per) - off);
  } else {
    // Every rank stops at its first claim past the end: the counter ends the operation at
    // claimed + chunks + n on every rank (no rank claims again before the next sync).
    const uint64_t chunks = (count + chunk - 1) / chunk;
    std::atomic<uint64_t>& claim = t_.header()->claim;
    const uint64_t claimed = t_.claimed();
    for (uint64_t c; (c = claim.fetch_add(1, std::memory_order_relaxed) - claimed) < chunks;) {
      const size_t off = size_t(c) * chunk;
      reduce_range(off, std::min(count - off, chunk));
    }
    t_.claimed() += chunks + uint64_t(size_);
  }
  store_fence();
  t_.sync("reduced into every output");
}

void ShmCollectives::broadcast(const OpDesc& d, char* buf, const RemoteRef& ref, size_t bytes, int root) {
  t_.slot(rank_)->main[0] = ref;
  t_.enter(d);
  if (rank_ != root && bytes) copy_bytes(buf, t_.peer(root, t_.slot(root)->main[0], bytes), bytes);
  t_.sync("copied from root");
}

void ShmCollectives::reduce(const OpDesc& d, const RemoteRef& sref, const RemoteRef& rref, size_t count, DataType dt,
                            const Reduction& red, int root) {
  const size_t es = dtype_size(dt), bytes = count * es;
  t_.slot(rank_)->main[0] = sref;
  t_.slot(rank_)->main[1] = rref;
  t_.enter(d);
  // Every rank reduces one block straight into the root's output.
  const size_t per = (count + size_ - 1) / size_;
  const size_t off = std::min(count, per * size_t(rank_)), n = std::min(count, off + per) - off;
  if (n) {
    std::vector<const void*> ins(size_);
    for (int r = 0; r < size_; ++r) ins[r] = t_.peer(r, t_.slot(r)->main[0], bytes) + off * es;
    reduce_buffers(t_.peer(root, t_.slot(root)->main[1], bytes) + off * es, ins.data(), size_, n, dt, red, size_);
  }
  t_.sync("reduced into root");
}

void ShmCollectives::all_gather_v(const OpDesc& d, const RemoteRef& sref, size_t send_count,
                                  const std::vector<Buffer>& recv, DataType dt) {
  const size_t es = dtype_size(dt);
  ShmSlot* s = t_.slot(rank_);
  s->main[0] = sref;
  s->counts[0] = send_count;
  t_.enter(d);
  for (int r = 0; r < size_; ++r) {
    const uint64_t c = t_.slot(r)->counts[0];
    if (c != recv[r].count) {
      t_.fail(Error::kMismatch, "neuron_ccl: all_gather #" + std::to_string(d.seq) + ": rank " + std::to_string(r) +
                                    " sends " + std::to_string(c) + " elements but rank " + std::to_string(rank_) +
                                    " expects " + std::to_string(recv[r].count) + " in output " + std::to_string(r));
    }
  }
  for (int i = 0; i < size_; ++i) {
    const int r = (rank_ + i) % size_;  // start at different peers to spread the reads
    if (!recv[r].count) continue;
    char* dst = static_cast<char*>(LocalMemory::alias(recv[r].ptr));
    const char* src = t_.peer(r, t_.slot(r)->main[0], recv[r].count * es);
    if (dst != src) copy_bytes(dst, src, recv[r].count * es);
  }
  t_.sync("gathered");
}

void ShmCollectives::reduce_scatter(const OpDesc& d, const std::vector<RemoteRef>& in, char* recv, size_t recv_count,
                                    DataType dt, const Reduction& red) {
  const size_t es = dtype_size(dt);
  ShmSlot* s = t_.slot(rank_);
  for (int r = 0; r < size_; ++r) s->bufs[r] = in[r];
  t_.enter(d);
  if (recv_count) {
    std::vector<const void*> ins(size_);
    for (int r = 0; r < size_; ++r) ins[r] = t_.peer(r, t_.slot(r)->bufs[rank_], recv_count * es);
    reduce_buffers(recv, ins.data(), size_, recv_count, dt, red, size_);
  }
  t_.sync("reduced");
}

void ShmCollectives::all_to_all_v(const OpDesc& d, const std::vector<RemoteRef>& in, const std::vector<Buffer>& send,
                                  const std::vector<Buffer>& recv, DataType dt, bool stage) {
  const size_t es = dtype_size(dt);
  ShmSlot* s = t_.slot(rank_);
  for (int r = 0; r < size_; ++r) {
    s->bufs[r] = in[r];
    s->counts[r] = send[r].count;
  }
  t_.enter(d);
  std::vector<size_t> offs(size_ + 1, 0);
  for (int r = 0; r < size_; ++r) {
    const uint64_t c = t_.slot(r)->counts[rank_];
    if (c != recv[r].count) {
      t_.fail(Error::kMismatch, "neuron_ccl: all_to_all #" + std::to_string(d.seq) + ": rank " + std::to_string(r) +
                                    " sends " + std::to_string(c) + " elements to rank " + std::to_string(rank_) +
                                    ", which expects " + std::to_string(recv[r].count) +
                                    " (input/output split sizes disagree)");
    }
    offs[r + 1] = offs[r] + c * es;
  }
  // In place, peers still read our input while we would overwrite it: stage the
  // incoming blocks until everyone has read.
  char* tmp = stage ? scratch(offs[size_]) : nullptr;
  for (int i = 0; i < size_; ++i) {
    const int r = (rank_ + i) % size_;
    const size_t b = recv[r].count * es;
    if (!b) continue;
    const char* src = t_.peer(r, t_.slot(r)->bufs[rank_], b);
    copy_bytes(stage ? tmp + offs[r] : static_cast<char*>(LocalMemory::alias(recv[r].ptr)), src, b);
  }
  t_.sync("exchanged");
  if (stage)
    for (int r = 0; r < size_; ++r)
      if (recv[r].count) std::memcpy(LocalMemory::alias(recv[r].ptr), tmp + offs[r], recv[r].count * es);
}

void ShmCollectives::gather(const OpDesc& d, const char* send, const RemoteRef& sref, size_t bytes,
                            const std::vector<RemoteRef>& outs, int root) {
  ShmSlot* s = t_.slot(rank_);
  s->main[0] = sref;
  for (int r = 0; r < size_; ++r) s->bufs[r] = outs[r];
  t_.enter(d);
  // Each rank writes its block into the root's output.
  if (bytes) {
    char* dst = t_.peer(root, t_.slot(root)->bufs[rank_], bytes);
    if (dst != send) copy_bytes(dst, send, bytes);
  }
  t_.sync("gathered");
}

void ShmCollectives::scatter(const OpDesc& d, char* recv, const RemoteRef& rref, size_t bytes,
                             const std::vector<RemoteRef>& ins, int root) {
  ShmSlot* s = t_.slot(rank_);
  s->main[1] = rref;
  for (int r = 0; r < size_; ++r) s->bufs[r] = ins[r];
  t_.enter(d);
  if (bytes) {
    const char* src = t_.peer(root, t_.slot(root)->bufs[rank_], bytes);
    if (recv != src) copy_bytes(recv, src, bytes);
  }
  t_.sync("scattered");
}

void ShmCollectives::barrier(const OpDesc& d) {
  t_.enter(d);
  t_.sync("barrier");  // a second sync keeps descriptors stable until every rank has checked them
}

void ShmCollectives::send(const RemoteRef& ref, size_t count, DataType dt, int peer, int tag) {
  ShmMailbox* m = t_.mailbox(rank_, peer);
  const uint64_t n = m->posted.load(std::memory_order_relaxed);
  t_.wait_until([&] { return n - m->taken.load(std::memory_order_acquire) < uint64_t(kMailboxDepth); },
                [&] { return std::vector<int>{peer}; }, "send: receiver's queue is full");
  m->ring[n % kMailboxDepth] = ShmMessage{tag, static_cast<int32_t>(dt), count, ref};
  m->posted.store(n + 1, std::memory_order_release);
}

void ShmCollectives::recv(char* buf, size_t count, DataType dt, int peer, int tag) {
  const size_t bytes = count * dtype_size(dt);
  ShmMailbox* m = t_.mailbox(peer, rank_);
  const uint64_t n = m->taken.load(std::memory_order_relaxed);
  t_.wait_until([&] { return m->posted.load(std::memory_order_acquire) > n; },
                [&] { return std::vector<int>{peer}; }, "recv: waiting for the matching send");
  const ShmMessage msg = m->ring[n % kMailboxDepth];
  if (msg.tag != tag || msg.count != count || msg.dtype != static_cast<int32_t>(dt)) {
    t_.fail(Error::kMismatch,
            "neuron_ccl: recv on rank " + std::to_string(rank_) + " from rank " + std::to_string(peer) +
                " expected tag " + std::to_string(tag) + ", " + std::to_string(count) + " x " + dtype_name(dt) +
                " but the next message sent has tag " + std::to_string(msg.tag) + ", " + std::to_string(msg.count) +
                " x " + dtype_name(static_cast<DataType>(msg.dtype)) + "; messages between two ranks arrive in order");
  }
  if (bytes) copy_bytes(buf, t_.peer(peer, msg.buf, bytes), bytes);
  m->taken.store(n + 1, std::memory_order_release);
}

void ShmCollectives::wait_sends(int peer) {
  ShmMailbox* m = t_.mailbox(rank_, peer);
  const uint64_t n = m->posted.load(std::memory_order_relaxed);
  t_.wait_until([&] { return m->taken.load(std::memory_order_acquire) >= n; },
                [&] { return std::vector<int>{peer}; }, "send: waiting for the receiver to take the message");
}

}  // namespace neuron_ccl
