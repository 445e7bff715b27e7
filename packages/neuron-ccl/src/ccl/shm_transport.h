// Shared-memory transport for the ranks of one host.
//
// Control segment (POSIX shared memory, created by rank 0, unlinked once every rank mapped it):
//   Header | Slot[size] | Mailbox[size*size]
// Each rank owns one Slot: a step counter on its own cache line and the descriptor and buffer
// references of its current operation. An operation is a short sequence of "syncs": a rank
// bumps its step and waits until every rank's step reaches it. Between syncs the ranks read
// each other's buffers directly through PeerMemory (single copy). The first sync of every
// operation publishes the descriptor, and all ranks compare descriptors before touching data,
// so a mismatched collective fails on every rank with the same message.
#pragma once

#include <immintrin.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "neuron_ccl/neuron_ccl.h"
#include "op_descriptor.h"
#include "peer_memory.h"

namespace neuron_ccl {

constexpr int kShmMaxRanks = 64;
constexpr int kMailboxDepth = 32;

struct ShmHeader {
  uint64_t magic;
  int32_t size;
  std::atomic<int32_t> aborted;  // 0, or 1 + the rank that reported the failure
  char abort_message[2048];
  // Chunks of the direct all-reduce are claimed from here (ShmTransport::claimed() is the
  // value every rank expects at the start of an operation).
  alignas(64) std::atomic<uint64_t> claim;
};

struct ShmSlot {
  alignas(64) std::atomic<uint64_t> step;
  alignas(64) std::atomic<uint64_t> progress;  // pieces finished (ring, recursive doubling)
  // Indexed by the sequence number's parity: after the pairwise algorithms (recursive
  // doubling) a rank may publish its next descriptor while a slower one still checks this one.
  alignas(64) OpDesc desc[2];
  int32_t pid;
  RemoteRef main[3];  // send, recv, staging
  RemoteRef bufs[kShmMaxRanks];
  uint64_t counts[kShmMaxRanks];
};

struct ShmMessage {
  int32_t tag;
  int32_t dtype;
  uint64_t count;
  RemoteRef buf;
};

struct ShmMailbox {  // from one rank to another
  alignas(64) std::atomic<uint64_t> posted;
  alignas(64) std::atomic<uint64_t> taken;
  alignas(64) ShmMessage ring[kMailboxDepth];
};

bool process_gone(int pid);

class ShmTransport {
 public:
  // What the transport needs of its communicator: the current operation for messages, and
  // the failure path (mark the communicator failed, tell the peers, dump the flight record).
  struct Hooks {
    std::function<std::string()> current_op;
    std::function<void(Error::Kind, const std::string&)> fail;  // throws
    std::function<void(const std::string&)> aborted;           // a peer aborted; the caller throws
  };

  // Creates the staging memory (NEURON_CCL_STAGING_BYTES), published to peers with the devices'
  // memfds as one more region.
  ShmTransport(const LocalMemory& local, int rank, int size, std::string name, std::chrono::milliseconds timeout,
               Hooks hooks);
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  int staging_fd() const { return stage_fd_; }
  size_t staging_bytes() const { return stage_bytes_; }
  // Maps the peers' memory lazily and creates (rank 0) or attaches the control segment.
  void connect(KVStore& store, const std::string& prefix, const std::vector<int>& pids,
               const std::vector<std::vector<std::pair<int, uint64_t>>>& fds);
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

  ShmHeader* header() const { return reinterpret_cast<ShmHeader*>(seg_); }
  ShmSlot* slot(int r) const { return reinterpret_cast<ShmSlot*>(seg_ + slots_off_) + r; }
  ShmMailbox* mailbox(int from, int to) const {
    return reinterpret_cast<ShmMailbox*>(seg_ + mail_off_) + (size_t(from) * size_ + to);
  }
  // Host address of `ref` in rank r's memory (our own buffers and staging included).
  char* peer(int r, const RemoteRef& ref, size_t bytes) {
    if (r == rank_ && size_t(ref.device) == local_.regions().size()) return stage_ + ref.offset;
    if (r == rank_) {
      // Our own buffers are reached through the local alias.
      return static_cast<char*>(reinterpret_cast<void*>(local_.regions()[ref.device].alias_base + ref.offset));
    }
    return peer_mem_.resolve(r, ref, bytes);
  }
  // This rank's staging memory for an all-reduce algorithm that needs `bytes` of it.
  RemoteRef staging_ref(size_t bytes, const char* algo) const;

  // Progress counter of this rank (mirrors its slot) and the claim counter's expected value.
  uint64_t& progress() { return progress_; }
  uint64_t& claimed() { return claimed_; }

  void publish_abort(const std::string& msg);
  void check_aborted();
  [[noreturn]] void fail(Error::Kind kind, const std::string& msg) {
    hooks_.fail(kind, msg);
    throw Error(kind, msg);
  }

  // Waits until `ready()` holds; `lagging()` names the ranks that are awaited. Fails on abort,
  // on a peer process that exited, and at the deadline.
  template <class Ready, class Lagging>
  void wait_until(Ready ready, Lagging lagging, const char* what) {
    if (ready()) return;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout_;
    auto next_liveness = start + std::chrono::milliseconds(20);
    for (uint64_t i = 0;; ++i) {
      if (ready()) return;
      if (i < uint64_t(spin_)) {
        _mm_pause();
        continue;
      }
      check_aborted();
      sched_yield();
      if ((i & 15) != 0) continue;
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_liveness) {
        next_liveness = now + std::chrono::milliseconds(20);
        for (int r : lagging()) {
          if (process_gone(pids_[r])) {
            fail(Error::kPeerFailure, "neuron_ccl: rank " + std::to_string(r) + " (pid " + std::to_string(pids_[r]) +
                                          ") exited while rank " + std::to_string(rank_) + " waited for it in " +
                                          hooks_.current_op() + " (" + what + ") on communicator '" + name_ + "'");
          }
        }
      }
      if (now >= deadline) timed_out(lagging(), what);
    }
  }

  // Every rank bumps its step and waits for the others. `then_check_abort`: fail if a rank
  // marked the communicator failed meanwhile (every rank may have arrived before one of them
  // failed; its memory must not be touched then).
  void sync(const char* what, bool then_check_abort = true);
  // Publishes the descriptor, waits for every rank, and checks that all called the same thing.
  void enter(const OpDesc& d);

 private:
  [[noreturn]] void timed_out(const std::vector<int>& lagging, const char* what);
  void map_segment(int fd, const std::string& name);

  const LocalMemory& local_;
  int rank_, size_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  int64_t spin_ = 100;
  Hooks hooks_;
  PeerMemory peer_mem_;
  std::vector<int> pids_;
  char* seg_ = nullptr;
  size_t seg_bytes_ = 0, slots_off_ = 0, mail_off_ = 0;
  uint64_t step_ = 0;
  int stage_fd_ = -1;
  char* stage_ = nullptr;
  size_t stage_bytes_ = 0;
  uint64_t progress_ = 0;
  uint64_t claimed_ = 0;  // header()->claim before the current operation (equal on every rank)
};

}  // namespace neuron_ccl
