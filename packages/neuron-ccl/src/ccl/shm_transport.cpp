#include "shm_transport.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include "env.h"

namespace neuron_ccl {
namespace {
constexpr uint64_t kMagic = 0x4e43434c53484d31ull;  // "NCCLSHM1"
size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

bool process_gone(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close_paren = line.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= line.size()) return false;
  const char state = line[close_paren + 2];
  return state == 'Z' || state == 'X';
}

ShmTransport::ShmTransport(const LocalMemory& local, int rank, int size, std::string name,
                           std::chrono::milliseconds timeout, Hooks hooks)
    : local_(local), rank_(rank), size_(size), name_(std::move(name)), timeout_(timeout), hooks_(std::move(hooks)) {
  spin_ = std::max<int64_t>(0, env_int("NEURON_CCL_SPIN"));
  // Staging memory for partial results of the ring / recursive doubling, published like a
  // device memfd so that peers map it the same way (one more entry after the devices).
  stage_bytes_ = size_t(std::max<int64_t>(4096, env_int("NEURON_CCL_STAGING_BYTES")));
  stage_fd_ = memfd_create("neuron_ccl.staging", MFD_CLOEXEC);
  if (stage_fd_ < 0 || ftruncate(stage_fd_, off_t(stage_bytes_)) != 0)
    throw Error(Error::kSystem, std::string("neuron_ccl: creating staging memory: ") + std::strerror(errno) +
                                    " (NEURON_CCL_STAGING_BYTES sets its size)");
  void* p = mmap(nullptr, stage_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, stage_fd_, 0);
  if (p == MAP_FAILED)
    throw Error(Error::kSystem, std::string("neuron_ccl: mapping staging memory: ") + std::strerror(errno));
  stage_ = static_cast<char*>(p);
}

ShmTransport::~ShmTransport() {
  if (seg_) munmap(seg_, seg_bytes_);
  if (stage_) munmap(stage_, stage_bytes_);
  if (stage_fd_ >= 0) close(stage_fd_);
}

void ShmTransport::connect(KVStore& store, const std::string& prefix, const std::vector<int>& pids,
                           const std::vector<std::vector<std::pair<int, uint64_t>>>& fds) {
  pids_ = pids;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) peer_mem_.add_peer(r, pids[r], fds[r]);
  }
  slots_off_ = align_up(sizeof(ShmHeader), 64);
  mail_off_ = align_up(slots_off_ + sizeof(ShmSlot) * size_, 64);
  seg_bytes_ = align_up(mail_off_ + sizeof(ShmMailbox) * size_ * size_, 4096);
  std::string shm_name;
  if (rank_ == 0) {
    std::random_device rd;
    for (int attempt = 0; attempt < 16 && !seg_; ++attempt) {
      shm_name = "/neuron_ccl." + std::to_string(getpid()) + "." + std::to_string(rd());
      const int fd = shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0) continue;
      if (ftruncate(fd, off_t(seg_bytes_)) != 0) {
        close(fd);
        shm_unlink(shm_name.c_str());
        throw Error(Error::kSystem, std::string("neuron_ccl: sizing the control segment: ") + std::strerror(errno));
      }
      map_segment(fd, shm_name);
    }
    if (!seg_) throw Error(Error::kSystem, "neuron_ccl: cannot create a control segment in /dev/shm");
    header()->magic = kMagic;
    header()->size = size_;
    store.set(prefix + "segment", shm_name);
    for (int r = 1; r < size_; ++r) store.get(prefix + "attached/" + std::to_string(r));
    shm_unlink(shm_name.c_str());  // nothing leaks if a rank dies later
  } else {
    shm_name = store.get(prefix + "segment");
    const int fd = shm_open(shm_name.c_str(), O_RDWR, 0600);
    if (fd < 0) {
      throw Error(Error::kSystem, "neuron_ccl: rank " + std::to_string(rank_) + " cannot open control segment " +
                                      shm_name + ": " + std::strerror(errno));
    }
    map_segment(fd, shm_name);
    store.set(prefix + "attached/" + std::to_string(rank_), "1");
  }
  slot(rank_)->pid = int32_t(getpid());
}

void ShmTransport::map_segment(int fd, const std::string& name) {
  void* p = mmap(nullptr, seg_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    throw Error(Error::kSystem, "neuron_ccl: mapping control segment " + name + ": " + std::strerror(errno));
  }
  seg_ = static_cast<char*>(p);
}

RemoteRef ShmTransport::staging_ref(size_t bytes, const char* algo) const {
  if (bytes > stage_bytes_) {
    throw Error(Error::kInvalidArgument,
                "neuron_ccl: all_reduce with algorithm " + std::string(algo) + " needs " + std::to_string(bytes) +
                    " bytes of staging memory but NEURON_CCL_STAGING_BYTES is " + std::to_string(stage_bytes_) +
                    "; raise it, or choose another algorithm with NEURON_CCL_ALGO=allreduce=twoshot");
  }
  return {int32_t(local_.regions().size()), 0};
}

void ShmTransport::publish_abort(const std::string& msg) {
  if (!seg_) return;
  int32_t expected = 0;
  if (header()->aborted.compare_exchange_strong(expected, -1)) {
    std::snprintf(header()->abort_message, sizeof header()->abort_message, "%s", msg.c_str());
    header()->aborted.store(rank_ + 1, std::memory_order_release);
  }
}

void ShmTransport::check_aborted() {
  if (!seg_) return;
  const int32_t a = header()->aborted.load(std::memory_order_acquire);
  if (a > 0) {
    const std::string msg = "neuron_ccl: " + hooks_.current_op() + " on rank " + std::to_string(rank_) +
                            " of communicator '" + name_ + "' aborted: rank " + std::to_string(a - 1) +
                            " reported: " + header()->abort_message;
    hooks_.aborted(msg);
    throw Error(Error::kAborted, msg);
  }
}

void ShmTransport::timed_out(const std::vector<int>& lagging, const char* what) {
  std::string ranks;
  for (int r : lagging) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  fail(Error::kTimeout,
       "neuron_ccl: " + hooks_.current_op() + " timed out after " + std::to_string(timeout_.count()) + " ms on rank " +
           std::to_string(rank_) + " of communicator '" + name_ + "' waiting for rank(s) [" + ranks + "] (" + what +
           "); they did not reach the same collective. Raise the limit with "
           "init_process_group(timeout=...) or NEURON_CCL_TIMEOUT_MS");
}

void ShmTransport::sync(const char* what, bool then_check_abort) {
  const uint64_t target = ++step_;
  slot(rank_)->step.store(target, std::memory_order_release);
  wait_until(
      [&] {
        for (int r = 0; r < size_; ++r)
          if (slot(r)->step.load(std::memory_order_acquire) < target) return false;
        return true;
      },
      [&] {
        std::vector<int> v;
        for (int r = 0; r < size_; ++r)
          if (slot(r)->step.load(std::memory_order_acquire) < target) v.push_back(r);
        return v;
      },
      what);
  if (then_check_abort) check_aborted();
}

void ShmTransport::enter(const OpDesc& d) {
  ShmSlot* s = slot(rank_);
  s->desc[d.seq & 1] = d;
  // Descriptors first, so that every rank of a mismatch reports the mismatch itself.
  sync("entering the collective", false);
  for (int r = 0; r < size_; ++r) {
    if (same_call(slot(r)->desc[d.seq & 1], d)) continue;
    const int lo = std::min(r, rank_), hi = std::max(r, rank_);
    const OpDesc& dl = slot(lo)->desc[d.seq & 1];
    const OpDesc& dh = slot(hi)->desc[d.seq & 1];
    fail(Error::kMismatch, "neuron_ccl: mismatched collectives on communicator '" + name_ + "': rank " +
                               std::to_string(lo) + " called " + describe(dl) + " while rank " + std::to_string(hi) +
                               " called " + describe(dh) +
                               "; every rank must issue the same collectives in the same order with "
                               "the same dtype and size");
  }
  check_aborted();
}

}  // namespace neuron_ccl
