// Collectives over the TCP transport (ranks on different hosts). Ring algorithms for the
// bandwidth-bound operations (all-reduce, all-gather, reduce-scatter), recursive doubling for
// small all-reduces on power-of-two rank counts, a binomial tree for small ones on other counts, direct sends for the rooted and personalised
// operations. Buffers are host addresses (the device memory's host alias).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "neuron_ccl/neuron_ccl.h"
#include "tcp_transport.h"

namespace neuron_ccl {

class TcpCollectives {
 public:
  // `describe` renders a frame header as "all_reduce #3 float32 count=7 op=SUM" for mismatch
  // errors; `slice_bytes` bounds each frame (pipelining and memory).
  TcpCollectives(TcpTransport& t, int rank, int size, std::function<std::string(const FrameHeader&)> describe,
                 size_t slice_bytes)
      : t_(t), rank_(rank), size_(size), describe_(std::move(describe)), slice_bytes_(slice_bytes) {}

  // `op` carries seq/op/dtype/count/root/redop of the call, sent with every frame and checked
  // by the receiver.
  void all_reduce(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt, const Reduction& red,
                  const std::string& algo);
  void broadcast(const FrameHeader& op, char* buf, size_t bytes, int root);
  void all_gather_v(const FrameHeader& op, const char* in, size_t in_bytes, const std::vector<char*>& out,
                    const std::vector<size_t>& out_bytes);
  void reduce_scatter(const FrameHeader& op, const std::vector<const char*>& in, char* out, size_t count, DataType dt,
                      const Reduction& red);
  void all_to_all_v(const FrameHeader& op, const std::vector<const char*>& in, const std::vector<size_t>& in_bytes,
                    const std::vector<char*>& out, const std::vector<size_t>& out_bytes, bool stage);
  void gather(const FrameHeader& op, const char* in, size_t bytes, const std::vector<char*>& out, int root);
  void scatter(const FrameHeader& op, const std::vector<const char*>& in, char* out, size_t bytes, int root);
  void barrier(const FrameHeader& op);
  void send(const FrameHeader& msg, const char* buf, size_t bytes, int peer);
  void recv(const FrameHeader& msg, char* buf, size_t bytes, int peer);

 private:
  static constexpr int kAckStep = -1;
  void acknowledge(const FrameHeader& op, int root, bool root_waits);
  template <class OnSlice>
  void exchange(const FrameHeader& op, int step, int to, const char* sdata, size_t sbytes, int from, size_t rbytes,
                const char* what, OnSlice on_slice);
  void send_to(int peer, const FrameHeader& op, int step, const char* data, size_t bytes, const char* what);
  // Receives the next collective frame from `peer`, checks it belongs to the same call and
  // carries `bytes`; returns the payload.
  const std::vector<char>& recv_from(int peer, const FrameHeader& op, int step, size_t bytes, const char* what);
  void ring_all_reduce(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                       const Reduction& red);
  void recursive_doubling(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                          const Reduction& red);
  void tree_all_reduce(const FrameHeader& op, const char* in, char* out, size_t count, DataType dt,
                       const Reduction& red);

  TcpTransport& t_;
  int rank_, size_;
  std::function<std::string(const FrameHeader&)> describe_;
  size_t slice_bytes_;
  std::vector<char> rx_, acc_, tmp_;
};

}  // namespace neuron_ccl
