// TCP transport: one connection per pair of ranks, for communicators whose ranks run on
// different hosts (or when NEURON_CCL_TRANSPORT=tcp forces it on one host).
//
// Every transfer is a frame: a fixed header (what the sender is executing, so the receiver can
// detect mismatched collectives) followed by the payload. While a rank sends, it keeps
// reading whatever arrives on every connection into per-peer queues, so two ranks that send
// to each other at once never block each other, whatever the message size. A peer whose
// connection closes (process exited) or that sends an abort frame makes the waiting rank fail
// at once; otherwise every wait ends at the communicator's timeout.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {

struct FrameHeader {
  enum Kind : int32_t { kCollective = 1, kPointToPoint = 2, kAbort = 3 };
  uint32_t magic = 0;
  int32_t kind = kCollective;
  uint64_t seq = 0;
  int32_t op = 0;
  int32_t dtype = 0;
  uint64_t count = 0;
  int32_t root = 0;
  int32_t redop = 0;
  uint64_t bytes = 0;  // payload length
  int32_t tag = 0;     // point to point: the user's tag; collectives: the algorithm step
  int32_t from = 0;
};

class TcpTransport {
 public:
  // Describes the operation in progress for error messages (set by the communicator).
  using Context = std::function<std::string()>;

  // Collective: listens, publishes its address under `prefix` in the store, connects to every
  // lower rank and accepts every higher one. `loopback`: all ranks share this host, use
  // 127.0.0.1; otherwise listen on every interface and publish NEURON_CCL_TCP_ADDR or the
  // address the host name resolves to.
  TcpTransport(KVStore& store, const std::string& prefix, int rank, int size, bool loopback,
               std::chrono::milliseconds timeout, Context context);
  ~TcpTransport();

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Writes the frame; returns once the kernel took every byte.
  void send(int peer, FrameHeader h, const void* data, size_t bytes, const char* what);
  // Next frame of `kind` from `peer` (blocks); its payload is moved into *payload.
  FrameHeader recv(int peer, int32_t kind, std::vector<char>* payload, const char* what);
  // Best effort: tells every peer that the communicator failed, without blocking.
  void abort_all(const std::string& message) noexcept;

 private:
  struct Frame {
    FrameHeader h;
    std::vector<char> payload;
  };
  struct Conn {
    int fd = -1;
    bool closed = false;
    std::string close_reason;
    FrameHeader hdr{};
    size_t hdr_got = 0;
    std::vector<char> payload;
    size_t pay_got = 0;
    bool in_payload = false;
    std::deque<Frame> collective, p2p;
  };
  template <class Done>
  void progress(Done done, int awaited, int write_fd, const char* what);
  void read_ready(int peer);
  void check_peer(int peer) const;  // a programming error if `peer` has no connection
  [[noreturn]] void fail_peer(int peer, const char* what);

  int rank_, size_;
  std::chrono::milliseconds timeout_;
  Context context_;
  std::vector<Conn> conns_;
  bool aborted_ = false;
};

}  // namespace neuron_ccl
