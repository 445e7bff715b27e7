// Communicator over shared memory for ranks on one host; with ranks on several hosts (or
// NEURON_CCL_TRANSPORT=tcp) every operation goes through TcpCollectives instead and the
// control segment below is not created.
//
// Control segment (POSIX shared memory, created by rank 0, unlinked once every rank mapped it):
//   Header | Slot[size] | Mailbox[size*size]
// Each rank owns one Slot: a step counter on its own cache line and the descriptor and buffer
// references of its current operation. An operation is a short sequence of "syncs": a rank
// bumps its step and waits until every rank's step reaches it. Between syncs the ranks read
// each other's buffers directly through PeerMemory (single copy). The first sync of every
// operation publishes the descriptor, and all ranks compare descriptors before touching data,
// so a mismatched collective fails on every rank with the same message.
#include <fcntl.h>
#include <immintrin.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "env.h"
#include "flight_recorder.h"
#include "interconnect_model.h"
#include "neuron_ccl/neuron_ccl.h"
#include "peer_memory.h"
#include "reduce.h"
#include "shm_algorithms.h"
#include "tcp_collectives.h"
#include "tcp_transport.h"

namespace neuron_ccl {

// ------------------------------------------------------------------ names and algorithm choice
namespace {
const char* kDtypeNames[] = {"float32", "float64", "float16", "bfloat16", "int8",
                             "uint8",   "int16",   "int32",   "int64",    "bool"};
const size_t kDtypeSizes[] = {4, 8, 2, 2, 1, 1, 2, 4, 8, 1};
const char* kReduceNames[] = {"SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM", "BAND", "BOR", "BXOR"};
}  // namespace

size_t dtype_size(DataType t) { return kDtypeSizes[static_cast<int>(t)]; }
const char* dtype_name(DataType t) { return kDtypeNames[static_cast<int>(t)]; }
DataType dtype_from_name(const std::string& name) {
  for (int i = 0; i < static_cast<int>(DataType::kCount_); ++i)
    if (name == kDtypeNames[i]) return static_cast<DataType>(i);
  throw Error(Error::kInvalidArgument, "neuron_ccl: unknown dtype '" + name + "'");
}
const char* reduce_op_name(ReduceOp op) { return kReduceNames[static_cast<int>(op)]; }
ReduceOp reduce_op_from_name(const std::string& name) {
  std::string up = name;
  for (auto& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (int i = 0; i < static_cast<int>(ReduceOp::kCount_); ++i)
    if (up == kReduceNames[i]) return static_cast<ReduceOp>(i);
  throw Error(Error::kInvalidArgument, "neuron_ccl: unknown reduce op '" + name + "'");
}

// ------------------------------------------------------------------ shared control segment
namespace {

constexpr int kMaxRanks = 64;
constexpr int kMailboxDepth = 32;
constexpr uint64_t kMagic = 0x4e43434c53484d31ull;  // "NCCLSHM1"
// Outputs from this size on are written with non-temporal stores when nothing reads them
// right back (they exceed the private caches; see copy_bytes in reduce.cpp).
constexpr size_t kStreamMinBytes = size_t(1) << 20;
// The direct all-reduce hands out chunks of this many bytes (of one input) from this size on:
// enough chunks to balance, few enough that claiming (one shared atomic each) is free.
constexpr size_t kClaimChunkBytes = size_t(1) << 20;
constexpr size_t kClaimMinBytes = size_t(4) << 20;

enum OpCode : int32_t {
  kOpAllReduce = 1, kOpBroadcast, kOpReduce, kOpAllGather, kOpReduceScatter, kOpAllToAll,
  kOpGather, kOpScatter, kOpBarrier
};
const char* op_name(int32_t op) {
  static const char* names[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather",
                                "reduce_scatter", "all_to_all", "gather", "scatter", "barrier"};
  return op >= 0 && op <= kOpBarrier ? names[op] : "?";
}

struct OpDesc {
  uint64_t seq;
  int32_t op;
  int32_t dtype;
  uint64_t count;  // elements, where every rank must agree (0 where sizes may differ)
  int32_t root;
  int32_t redop;
};

std::string describe(const OpDesc& x) {
  std::string s = std::string(op_name(x.op)) + " #" + std::to_string(x.seq) + " " +
                  dtype_name(static_cast<DataType>(x.dtype));
  if (x.count) s += " count=" + std::to_string(x.count);
  if (x.op == kOpBroadcast || x.op == kOpReduce || x.op == kOpGather || x.op == kOpScatter)
    s += " root=" + std::to_string(x.root);
  if (x.op == kOpAllReduce || x.op == kOpReduce || x.op == kOpReduceScatter)
    s += std::string(" op=") + reduce_op_name(static_cast<ReduceOp>(x.redop));
  return s;
}

struct Header {
  uint64_t magic;
  int32_t size;
  std::atomic<int32_t> aborted;  // 0, or 1 + the rank that reported the failure
  char abort_message[2048];
  // Chunks of the direct all-reduce are claimed from here (CommunicatorImpl::claimed_ is the
  // value every rank expects at the start of an operation).
  alignas(64) std::atomic<uint64_t> claim;
};

struct Slot {
  alignas(64) std::atomic<uint64_t> step;
  alignas(64) std::atomic<uint64_t> progress;  // pieces finished (ring, recursive doubling)
  // Indexed by the sequence number's parity: after the pairwise algorithms (recursive
  // doubling) a rank may publish its next descriptor while a slower one still checks this one.
  alignas(64) OpDesc desc[2];
  int32_t pid;
  RemoteRef main[3];  // send, recv, staging
  RemoteRef bufs[kMaxRanks];
  uint64_t counts[kMaxRanks];
};

struct Message {
  int32_t tag;
  int32_t dtype;
  uint64_t count;
  RemoteRef buf;
};

struct Mailbox {  // from one rank to another
  alignas(64) std::atomic<uint64_t> posted;
  alignas(64) std::atomic<uint64_t> taken;
  alignas(64) Message ring[kMailboxDepth];
};

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string host_identity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot;
}

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

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

struct PeerInfo {
  std::string transport;  // NEURON_CCL_TRANSPORT of that rank
  std::string host;
  int pid = 0;
  int local_rank = 0;
  int device = 0;
  int chip = 0;
  std::vector<std::pair<int, uint64_t>> fds;
};

std::string encode_info(const PeerInfo& p) {
  std::ostringstream o;
  o << p.transport << ' ' << p.pid << ' ' << p.local_rank << ' ' << p.device << ' ' << p.chip << ' ' << p.fds.size();
  for (auto& f : p.fds) o << ' ' << f.first << ' ' << f.second;
  o << ' ' << p.host;
  return o.str();
}
PeerInfo decode_info(const std::string& s) {
  std::istringstream i(s);
  PeerInfo p;
  size_t n = 0;
  i >> p.transport >> p.pid >> p.local_rank >> p.device >> p.chip >> n;
  p.fds.resize(n);
  for (auto& f : p.fds) i >> f.first >> f.second;
  i >> std::ws;
  std::getline(i, p.host);
  return p;
}

}  // namespace

// ------------------------------------------------------------------ implementation
class CommunicatorImpl {
 public:
  CommunicatorImpl(std::shared_ptr<KVStore> store, int rank, int size, const CommOptions& opt)
      : store_(std::move(store)), rank_(rank), size_(size), opt_(opt),
        recorder_(size_t(std::max<int64_t>(1, env_int("NEURON_CCL_FLIGHT_RECORDER_SIZE")))) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: rank " + std::to_string(rank) +
                                               " is outside a communicator of size " + std::to_string(size));
    }
    if (size > kMaxRanks) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: " + std::to_string(size) +
                                               " ranks exceed the shared-memory transport's limit of " +
                                               std::to_string(kMaxRanks) + " ranks per host");
    }
    if (const int64_t t = env_int("NEURON_CCL_TIMEOUT_MS")) opt_.timeout = std::chrono::milliseconds(t);
    spin_ = std::max<int64_t>(0, env_int("NEURON_CCL_SPIN"));
    bootstrap();
  }

  ~CommunicatorImpl() {
    if (seg_) munmap(seg_, seg_bytes_);
    if (stage_) munmap(stage_, stage_bytes_);
    if (stage_fd_ >= 0) close(stage_fd_);
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return opt_.device; }
  const std::string& name() const { return opt_.name; }
  const std::string& transport() const { return transport_; }
  std::chrono::milliseconds timeout() const { return opt_.timeout; }
  void set_timeout(std::chrono::milliseconds t) {
    opt_.timeout = t;
    if (tcp_) tcp_->set_timeout(t);
  }
  std::shared_ptr<KVStore> store() const { return store_; }
  const CommOptions& options() const { return opt_; }
  std::string flight_record() const { return recorder_.dump(dump_header()); }

  // ---------------------------------------------------------------- bootstrap
  void bootstrap() {
    local_.discover();
    if (opt_.device < 0 || size_t(opt_.device) >= local_.regions().size()) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: device " + std::to_string(opt_.device) +
                                               " is not one of this process's " +
                                               std::to_string(local_.regions().size()) + " devices");
    }
    const std::string prefix = "neuron_ccl/" + opt_.name + "/";
    PeerInfo me;
    me.transport = env_string("NEURON_CCL_TRANSPORT");
    if (me.transport != "auto" && me.transport != "shm" && me.transport != "tcp") {
      throw Error(Error::kInvalidArgument, "neuron_ccl: NEURON_CCL_TRANSPORT='" + me.transport +
                                               "' is not one of auto, shm, tcp");
    }
    me.host = host_identity();
    me.pid = int(getpid());
    me.device = opt_.device;
    for (const auto& r : local_.regions()) me.fds.emplace_back(r.fd, r.size);
    if (me.transport != "tcp") {
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
      me.fds.emplace_back(stage_fd_, stage_bytes_);
    }
    store_->set(prefix + "info/" + std::to_string(rank_), encode_info(me));
    peers_.resize(size_);
    for (int r = 0; r < size_; ++r) peers_[r] = decode_info(store_->get(prefix + "info/" + std::to_string(r)));
    // Local rank = position among the ranks of this host unless the caller knows it (LOCAL_RANK).
    int local = 0;
    int other_host = -1;
    for (int r = 0; r < size_; ++r) {
      if (peers_[r].transport != me.transport) {
        throw Error(Error::kInvalidArgument, "neuron_ccl: communicator '" + opt_.name + "': rank " +
                                                 std::to_string(rank_) + " has NEURON_CCL_TRANSPORT=" + me.transport +
                                                 " but rank " + std::to_string(r) + " has " + peers_[r].transport +
                                                 "; every rank must use the same transport");
      }
      if (peers_[r].host != me.host) {
        other_host = r;
        continue;
      }
      if (r < rank_) ++local;
    }
    if (other_host >= 0 && me.transport == "shm") {
      throw Error(Error::kInvalidArgument,
                  "neuron_ccl: communicator '" + opt_.name + "' spans hosts (rank " + std::to_string(rank_) + " on " +
                      me.host + ", rank " + std::to_string(other_host) + " on " + peers_[other_host].host +
                      ") but NEURON_CCL_TRANSPORT=shm needs every rank on one host; use auto or tcp");
    }
    const bool use_tcp = me.transport == "tcp" || other_host >= 0;
    const int local_rank = opt_.local_rank >= 0 ? opt_.local_rank : local;
    nsimDeviceProperties props{};
    nsimGetDeviceProperties(opt_.device, &props);
    const int cores = std::max(1, props.logical_cores_per_chip);
    // The chip a rank's core belongs to on the modelled instance: torchrun places local rank l
    // on logical core l, so ranks 0..cores-1 share chip 0.
    const int my_chip = local_rank / cores;
    store_->set(prefix + "chip/" + std::to_string(rank_), std::to_string(my_chip));
    LinkClass link = LinkClass::kSameChip;
    for (int r = 0; r < size_; ++r) {
      peers_[r].chip = std::stoi(store_->get(prefix + "chip/" + std::to_string(r)));
      if (peers_[r].chip != my_chip) link = LinkClass::kSameHost;
    }
    if (other_host >= 0) link = LinkClass::kCrossHost;
    model_.init(opt_.device, link);
    if (use_tcp) {
      transport_ = "tcp";
      tcp_ = std::make_unique<TcpTransport>(*store_, prefix, rank_, size_, other_host < 0, opt_.timeout, [this] {
        return current_op() + " of communicator '" + opt_.name + "'";
      });
      tcp_ops_ = std::make_unique<TcpCollectives>(*tcp_, rank_, size_, [](const FrameHeader& h) {
        return describe(OpDesc{h.seq, h.op, h.dtype, h.count, h.root, h.redop});
      }, size_t(std::max<int64_t>(4096, env_int("NEURON_CCL_RING_SLICE_BYTES"))));
      return;
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) peer_mem_.add_peer(r, peers_[r].pid, peers_[r].fds);
    }

    // Control segment.
    slots_off_ = align_up(sizeof(Header), 64);
    mail_off_ = align_up(slots_off_ + sizeof(Slot) * size_, 64);
    seg_bytes_ = align_up(mail_off_ + sizeof(Mailbox) * size_ * size_, 4096);
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
      store_->set(prefix + "segment", shm_name);
      for (int r = 1; r < size_; ++r) store_->get(prefix + "attached/" + std::to_string(r));
      shm_unlink(shm_name.c_str());  // nothing leaks if a rank dies later
    } else {
      shm_name = store_->get(prefix + "segment");
      const int fd = shm_open(shm_name.c_str(), O_RDWR, 0600);
      if (fd < 0) {
        throw Error(Error::kSystem, "neuron_ccl: rank " + std::to_string(rank_) + " cannot open control segment " +
                                        shm_name + ": " + std::strerror(errno));
      }
      map_segment(fd, shm_name);
      store_->set(prefix + "attached/" + std::to_string(rank_), "1");
    }
    slot(rank_)->pid = me.pid;
  }

  void map_segment(int fd, const std::string& name) {
    void* p = mmap(nullptr, seg_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      throw Error(Error::kSystem, "neuron_ccl: mapping control segment " + name + ": " + std::strerror(errno));
    }
    seg_ = static_cast<char*>(p);
  }

  Header* header() const { return reinterpret_cast<Header*>(seg_); }
  Slot* slot(int r) const { return reinterpret_cast<Slot*>(seg_ + slots_off_) + r; }
  Mailbox* mailbox(int from, int to) const {
    return reinterpret_cast<Mailbox*>(seg_ + mail_off_) + (size_t(from) * size_ + to);
  }

  // ---------------------------------------------------------------- errors
  std::string dump_header() const {
    return "neuron_ccl flight recorder: communicator '" + opt_.name + "' rank " + std::to_string(rank_) +
           "/" + std::to_string(size_) + " pid " + std::to_string(getpid()) + " device " +
           std::to_string(opt_.device);
  }

  void dump_record() {
    if (dumped_) return;
    dumped_ = true;
    const std::string text = recorder_.dump(dump_header());
    std::cerr << text << std::flush;
    const std::string dir = env_string("NEURON_CCL_FLIGHT_RECORDER_DIR");
    if (!dir.empty()) {
      std::ofstream f(dir + "/neuron_ccl_rank" + std::to_string(rank_) + ".txt", std::ios::app);
      f << text;
    }
  }

  void publish_abort(const std::string& msg) {
    if (tcp_) return tcp_->abort_all(msg);
    int32_t expected = 0;
    if (header()->aborted.compare_exchange_strong(expected, -1)) {
      std::snprintf(header()->abort_message, sizeof header()->abort_message, "%s", msg.c_str());
      header()->aborted.store(rank_ + 1, std::memory_order_release);
    }
  }

  [[noreturn]] void fail(Error::Kind kind, const std::string& msg) {
    broken_ = msg;
    publish_abort(msg);
    dump_record();
    throw Error(kind, msg);
  }

  std::string current_op() const {
    return std::string(op_name(cur_.op)) + " #" + std::to_string(cur_.seq) + " (" +
           dtype_name(static_cast<DataType>(cur_.dtype)) + ", " + std::to_string(cur_.count) +
           " elements)";
  }

  void check_aborted() {
    if (!seg_) return;  // TCP: abort frames arrive with the data
    const int32_t a = header()->aborted.load(std::memory_order_acquire);
    if (a > 0) {
      const std::string msg = "neuron_ccl: " + current_op() + " on rank " + std::to_string(rank_) +
                              " of communicator '" + opt_.name + "' aborted: rank " + std::to_string(a - 1) +
                              " reported: " + header()->abort_message;
      broken_ = msg;
      dump_record();
      throw Error(Error::kAborted, msg);
    }
  }

  // Waits until `ready()` holds; `lagging()` names the ranks that are awaited. Fails on abort,
  // on a peer process that exited, and at the deadline.
  template <class Ready, class Lagging>
  void wait_until(Ready ready, Lagging lagging, const char* what) {
    if (ready()) return;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + opt_.timeout;
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
          if (process_gone(peers_[r].pid)) {
            fail(Error::kPeerFailure, "neuron_ccl: rank " + std::to_string(r) + " (pid " +
                                          std::to_string(peers_[r].pid) + ") exited while rank " +
                                          std::to_string(rank_) + " waited for it in " + current_op() +
                                          " (" + what + ") on communicator '" + opt_.name + "'");
          }
        }
      }
      if (now >= deadline) {
        std::string ranks;
        for (int r : lagging()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
        fail(Error::kTimeout,
             "neuron_ccl: " + current_op() + " timed out after " + std::to_string(opt_.timeout.count()) +
                 " ms on rank " + std::to_string(rank_) + " of communicator '" + opt_.name +
                 "' waiting for rank(s) [" + ranks + "] (" + what +
                 "); they did not reach the same collective. Raise the limit with "
                 "init_process_group(timeout=...) or NEURON_CCL_TIMEOUT_MS");
      }
    }
  }

  // `then_check_abort`: fail if a rank marked the communicator failed meanwhile (every rank
  // may have arrived before one of them failed; its memory must not be touched then).
  void sync(const char* what, bool then_check_abort = true) {
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

  // Publishes the descriptor, waits for every rank, and checks that all called the same thing.
  void enter(const OpDesc& d) {
    Slot* s = slot(rank_);
    s->desc[d.seq & 1] = d;
    // Descriptors first, so that every rank of a mismatch reports the mismatch itself.
    sync("entering the collective", false);
    for (int r = 0; r < size_; ++r) {
      const OpDesc& o = slot(r)->desc[d.seq & 1];
      if (o.seq == d.seq && o.op == d.op && o.dtype == d.dtype && o.count == d.count && o.root == d.root &&
          o.redop == d.redop)
        continue;
      const int lo = std::min(r, rank_), hi = std::max(r, rank_);
      const OpDesc& dl = slot(lo)->desc[d.seq & 1];
      const OpDesc& dh = slot(hi)->desc[d.seq & 1];
      fail(Error::kMismatch, "neuron_ccl: mismatched collectives on communicator '" + opt_.name + "': rank " +
                                 std::to_string(lo) + " called " + describe(dl) + " while rank " +
                                 std::to_string(hi) + " called " + describe(dh) +
                                 "; every rank must issue the same collectives in the same order with "
                                 "the same dtype and size");
    }
    check_aborted();
  }

  // ---------------------------------------------------------------- running an operation
  template <class Body>
  void run(int32_t op, DataType dt, uint64_t count, int root, ReduceOp red, const std::string& model_op,
           size_t model_bytes, const std::string& algo, nsimQueue queue, Body body) {
    if (!broken_.empty()) {
      throw Error(Error::kAborted, "neuron_ccl: communicator '" + opt_.name + "' is unusable after an earlier error: " +
                                       broken_);
    }
    cur_ = OpDesc{++seq_, op, static_cast<int32_t>(dt), count, root, static_cast<int32_t>(red)};
    char detail[256];
    std::snprintf(detail, sizeof detail, "%s count=%llu root=%d op=%s algo=%s bytes=%zu", dtype_name(dt),
                  static_cast<unsigned long long>(count), root, reduce_op_name(red), algo.c_str(), model_bytes);
    const size_t rec = recorder_.record(seq_, op_name(op), detail);
    if (!queue && nsimQueueGetDefault(opt_.device, &queue) != NSIM_SUCCESS) {
      recorder_.finish(rec, FlightRecorder::kFailed);
      throw Error(Error::kSystem, std::string("neuron_ccl: no default queue: ") + nsimGetLastErrorMessage());
    }
    struct Ctx {
      Body* body;
      std::exception_ptr error;
    } ctx{&body, nullptr};
    auto trampoline = [](void* user) -> int {
      auto* c = static_cast<Ctx*>(user);
      try {
        (*c->body)();
        return 0;
      } catch (...) {
        c->error = std::current_exception();
        return 1;
      }
    };
    const double ns = model_.duration_ns(model_op, model_bytes, size_, algo);
    const nsimError err = nsimLaunch(queue, name_id(op), NSIM_LAUNCH_COLLECTIVE, ns, trampoline, &ctx);
    if (ctx.error) {
      recorder_.finish(rec, FlightRecorder::kFailed);
      note_failure(ctx.error);
      std::rethrow_exception(ctx.error);
    }
    if (err != NSIM_SUCCESS) {
      recorder_.finish(rec, FlightRecorder::kFailed);
      fail(Error::kSystem, "neuron_ccl: " + current_op() + " could not be launched on device " +
                               std::to_string(opt_.device) + " (rank " + std::to_string(rank_) +
                               "): " + nsimGetLastErrorMessage());
    }
    recorder_.finish(rec, FlightRecorder::kCompleted);
  }

  // A failure inside an operation (other ranks may be waiting on this one) makes the
  // communicator unusable and tells the peers, unless fail() already did.
  void note_failure(std::exception_ptr e) {
    if (!broken_.empty()) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      broken_ = x.what();
    } catch (...) {
      broken_ = "unknown error";
    }
    publish_abort(broken_);
    dump_record();
  }

  // The header every TCP frame of the current operation carries.
  FrameHeader wire() const {
    FrameHeader h;
    h.seq = cur_.seq;
    h.op = cur_.op;
    h.dtype = cur_.dtype;
    h.count = cur_.count;
    h.root = cur_.root;
    h.redop = cur_.redop;
    return h;
  }

  // The view of this communicator the shared-memory ring / recursive doubling work on.
  class Peers : public ShmPeers {
   public:
    explicit Peers(CommunicatorImpl& c) : c_(c), base_(c.progress_) {}
    int rank() const override { return c_.rank_; }
    int size() const override { return c_.size_; }
    char* buffer(int r, Which w, size_t bytes) override { return c_.peer(r, c_.slot(r)->main[w], bytes); }
    void publish_progress(uint64_t done) override {
      c_.progress_ = base_ + done;
      c_.slot(c_.rank_)->progress.store(c_.progress_, std::memory_order_release);
    }
    void wait_progress(int r, uint64_t done, const char* what) override {
      std::atomic<uint64_t>& p = c_.slot(r)->progress;
      const uint64_t target = base_ + done;
      c_.wait_until([&] { return p.load(std::memory_order_acquire) >= target; },
                    [&] { return std::vector<int>{r}; }, what);
    }

   private:
    CommunicatorImpl& c_;
    uint64_t base_;
  };

  RemoteRef staging_ref(size_t bytes, const char* algo) {
    if (bytes > stage_bytes_) {
      throw Error(Error::kInvalidArgument,
                  "neuron_ccl: all_reduce with algorithm " + std::string(algo) + " needs " + std::to_string(bytes) +
                      " bytes of staging memory but NEURON_CCL_STAGING_BYTES is " + std::to_string(stage_bytes_) +
                      "; raise it, or choose another algorithm with NEURON_CCL_ALGO=allreduce=twoshot");
    }
    return {int32_t(local_.regions().size()), 0};
  }

  uint32_t name_id(int32_t op) {
    if (name_ids_.empty()) {
      name_ids_.resize(kOpBarrier + 1);
      for (int i = 1; i <= kOpBarrier; ++i)
        nsimRegisterName((std::string("neuron_ccl.") + op_name(i)).c_str(), &name_ids_[i]);
    }
    return name_ids_[op];
  }

  char* peer(int r, const RemoteRef& ref, size_t bytes) {
    if (r == rank_ && size_t(ref.device) == local_.regions().size()) return stage_ + ref.offset;
    if (r == rank_) {
      // Our own buffers are reached through the local alias.
      return static_cast<char*>(reinterpret_cast<void*>(local_.regions()[ref.device].alias_base + ref.offset));
    }
    return peer_mem_.resolve(r, ref, bytes);
  }

  RemoteRef locate(const void* p, size_t bytes, const char* what) {
    if (bytes == 0) return {};
    return local_.locate(p, bytes, what);
  }

  char* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  // ---------------------------------------------------------------- collectives
  void all_reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, nsimQueue q) {
    check_reduction(dt, red, "all_reduce");
    const size_t es = dtype_size(dt), bytes = count * es;
    const std::string algo = select_algorithm("allreduce", bytes, size_, transport_);
    const RemoteRef sref = locate(send, bytes, "all_reduce send");
    const RemoteRef rref = locate(recv, bytes, "all_reduce recv");
    RemoteRef stage{};
    const size_t ring_slice = size_t(std::max<int64_t>(64, env_int("NEURON_CCL_RING_SLICE_BYTES")));
    if (algo == "ring" && !tcp_) stage = staging_ref(ring_staging_bytes(count, dt, size_, ring_slice), "ring");
    if (algo == "rdouble" && !is_power_of_two(size_)) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: all_reduce: NEURON_CCL_ALGO forces rdouble (recursive "
                                           "doubling), which needs a power-of-two rank count, not " +
                                               std::to_string(size_));
    }
    if (algo == "rdouble" && !tcp_) stage = staging_ref(recursive_doubling_staging_bytes(count, dt, size_), "rdouble");
    run(kOpAllReduce, dt, count, 0, red.op, "allreduce", bytes, algo, q, [&] {
      if (tcp_) {
        return tcp_ops_->all_reduce(wire(), static_cast<const char*>(LocalMemory::alias(send)),
                                    static_cast<char*>(LocalMemory::alias(recv)), count, dt, red, algo);
      }
      Slot* s = slot(rank_);
      s->main[0] = sref;
      s->main[1] = rref;
      s->main[2] = stage;
      enter(cur_);
      if (algo == "ring" || algo == "rdouble") {
        if (count == 0) return sync("leaving");
        const bool in_place = overlaps(LocalMemory::alias(send), bytes, LocalMemory::alias(recv), bytes);
        Peers peers(*this);
        if (algo == "ring") {
          ring_all_reduce(peers, count, dt, red, in_place, ring_slice);
        } else {
          recursive_doubling_all_reduce(peers, count, dt, red, in_place);
        }
        return;
      }
      if (count == 0) return sync("leaving");
      char* out = static_cast<char*>(LocalMemory::alias(recv));
      const char* in_self = static_cast<const char*>(LocalMemory::alias(send));
      std::vector<const void*> ins(size_);
      if (algo == "oneshot") {
        for (int r = 0; r < size_; ++r) ins[r] = peer(r, slot(r)->main[0], bytes);
        // Peers read our send buffer until the second sync; reduce into scratch when the
        // result would overwrite it.
        const bool aliased = overlaps(out, bytes, in_self, bytes);
        char* dst = aliased ? scratch(bytes) : out;
        reduce_buffers(dst, ins.data(), size_, count, dt, red, size_);
        sync("reduced");
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
        in_base[r] = peer(r, slot(r)->main[0], bytes);
        out_base[r] = peer(r, slot(r)->main[1], bytes);
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
        // claimed_ + chunks + n on every rank (no rank claims again before the next sync).
        const uint64_t chunks = (count + chunk - 1) / chunk;
        std::atomic<uint64_t>& claim = header()->claim;
        for (uint64_t c; (c = claim.fetch_add(1, std::memory_order_relaxed) - claimed_) < chunks;) {
          const size_t off = size_t(c) * chunk;
          reduce_range(off, std::min(count - off, chunk));
        }
        claimed_ += chunks + uint64_t(size_);
      }
      store_fence();
      sync("reduced into every output");
    });
  }

  void broadcast(void* buf, size_t count, DataType dt, int root, nsimQueue q) {
    check_root(root, "broadcast");
    const size_t bytes = count * dtype_size(dt);
    const RemoteRef ref = locate(buf, bytes, "broadcast");
    const std::string algo = select_algorithm("broadcast", bytes, size_, transport_);
    run(kOpBroadcast, dt, count, root, ReduceOp::kSum, "broadcast", bytes, algo, q, [&] {
      if (tcp_) return tcp_ops_->broadcast(wire(), static_cast<char*>(LocalMemory::alias(buf)), bytes, root);
      slot(rank_)->main[0] = ref;
      enter(cur_);
      if (rank_ != root && bytes) copy_bytes(LocalMemory::alias(buf), peer(root, slot(root)->main[0], bytes), bytes);
      sync("copied from root");
    });
  }

  void reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, int root, nsimQueue q) {
    check_root(root, "reduce");
    check_reduction(dt, red, "reduce");
    const size_t es = dtype_size(dt), bytes = count * es;
    const RemoteRef sref = locate(send, bytes, "reduce send");
    const RemoteRef rref = rank_ == root ? locate(recv, bytes, "reduce recv") : RemoteRef{};
    const std::string algo = select_algorithm("reduce", bytes, size_, transport_);
    run(kOpReduce, dt, count, root, red.op, "reduce", bytes, algo, q, [&] {
      if (tcp_) {
        // A ring all-reduce whose result non-roots drop: bandwidth-optimal, and the root's
        // result has the same bits as an all-reduce.
        char* out = rank_ == root ? static_cast<char*>(LocalMemory::alias(recv)) : scratch(bytes);
        return tcp_ops_->all_reduce(wire(), static_cast<const char*>(LocalMemory::alias(send)), out, count, dt, red,
                                    "ring");
      }
      slot(rank_)->main[0] = sref;
      slot(rank_)->main[1] = rref;
      enter(cur_);
      // Every rank reduces one block straight into the root's output.
      const size_t per = (count + size_ - 1) / size_;
      const size_t off = std::min(count, per * size_t(rank_)), n = std::min(count, off + per) - off;
      if (n) {
        std::vector<const void*> ins(size_);
        for (int r = 0; r < size_; ++r) ins[r] = peer(r, slot(r)->main[0], bytes) + off * es;
        reduce_buffers(peer(root, slot(root)->main[1], bytes) + off * es, ins.data(), size_, n, dt, red, size_);
      }
      sync("reduced into root");
    });
  }

  void all_gather_v(const void* send, size_t send_count, const std::vector<Buffer>& recv, DataType dt,
                    nsimQueue q, bool uniform) {
    check_list(recv, "all_gather recv");
    const size_t es = dtype_size(dt);
    const RemoteRef sref = locate(send, send_count * es, "all_gather send");
    size_t total = 0;
    for (const auto& b : recv) {
      locate(b.ptr, b.count * es, "all_gather recv");
      total += b.count * es;
    }
    const std::string algo = select_algorithm("allgather", total, size_, transport_);
    run(kOpAllGather, dt, uniform ? send_count : 0, 0, ReduceOp::kSum, "allgather", total, algo, q, [&] {
      if (tcp_) {
        std::vector<char*> outs(size_);
        std::vector<size_t> out_bytes(size_);
        for (int r = 0; r < size_; ++r) {
          outs[r] = static_cast<char*>(LocalMemory::alias(recv[r].ptr));
          out_bytes[r] = recv[r].count * es;
        }
        return tcp_ops_->all_gather_v(wire(), static_cast<const char*>(LocalMemory::alias(send)), send_count * es,
                                      outs, out_bytes);
      }
      Slot* s = slot(rank_);
      s->main[0] = sref;
      s->counts[0] = send_count;
      enter(cur_);
      for (int r = 0; r < size_; ++r) {
        const uint64_t c = slot(r)->counts[0];
        if (c != recv[r].count) {
          fail(Error::kMismatch, "neuron_ccl: all_gather #" + std::to_string(seq_) + ": rank " + std::to_string(r) +
                                     " sends " + std::to_string(c) + " elements but rank " + std::to_string(rank_) +
                                     " expects " + std::to_string(recv[r].count) + " in output " + std::to_string(r));
        }
      }
      for (int i = 0; i < size_; ++i) {
        const int r = (rank_ + i) % size_;  // start at different peers to spread the reads
        if (!recv[r].count) continue;
        char* dst = static_cast<char*>(LocalMemory::alias(recv[r].ptr));
        const char* src = peer(r, slot(r)->main[0], recv[r].count * es);
        if (dst != src) copy_bytes(dst, src, recv[r].count * es);
      }
      sync("gathered");
    });
  }

  void reduce_scatter_v(const std::vector<Buffer>& send, void* recv, size_t recv_count, DataType dt,
                        Reduction red, nsimQueue q) {
    check_list(send, "reduce_scatter send");
    check_reduction(dt, red, "reduce_scatter");
    const size_t es = dtype_size(dt);
    std::vector<RemoteRef> refs(size_);
    size_t total = 0;
    for (int r = 0; r < size_; ++r) {
      if (send[r].count != recv_count) {
        throw Error(Error::kInvalidArgument,
                    "neuron_ccl: reduce_scatter on rank " + std::to_string(rank_) + ": input block " + std::to_string(r) +
                        " has " + std::to_string(send[r].count) + " elements but the output has " +
                        std::to_string(recv_count));
      }
      refs[r] = locate(send[r].ptr, recv_count * es, "reduce_scatter send");
      total += recv_count * es;
    }
    locate(recv, recv_count * es, "reduce_scatter recv");
    const std::string algo = select_algorithm("reducescatter", total, size_, transport_);
    run(kOpReduceScatter, dt, recv_count, 0, red.op, "reducescatter", total, algo, q, [&] {
      if (tcp_) {
        std::vector<const char*> ins(size_);
        for (int r = 0; r < size_; ++r) ins[r] = static_cast<const char*>(LocalMemory::alias(send[r].ptr));
        return tcp_ops_->reduce_scatter(wire(), ins, static_cast<char*>(LocalMemory::alias(recv)), recv_count, dt,
                                        red);
      }
      Slot* s = slot(rank_);
      for (int r = 0; r < size_; ++r) s->bufs[r] = refs[r];
      enter(cur_);
      if (recv_count) {
        std::vector<const void*> ins(size_);
        for (int r = 0; r < size_; ++r) ins[r] = peer(r, slot(r)->bufs[rank_], recv_count * es);
        reduce_buffers(LocalMemory::alias(recv), ins.data(), size_, recv_count, dt, red, size_);
      }
      sync("reduced");
    });
  }

  void all_to_all_v(const std::vector<Buffer>& send, const std::vector<Buffer>& recv, DataType dt, nsimQueue q) {
    check_list(send, "all_to_all send");
    check_list(recv, "all_to_all recv");
    const size_t es = dtype_size(dt);
    std::vector<RemoteRef> refs(size_);
    size_t total = 0;
    bool stage = false;
    for (int r = 0; r < size_; ++r) {
      refs[r] = locate(send[r].ptr, send[r].count * es, "all_to_all send");
      locate(recv[r].ptr, recv[r].count * es, "all_to_all recv");
      total += recv[r].count * es;
    }
    for (int a = 0; a < size_; ++a)
      for (int b = 0; b < size_; ++b)
        if (overlaps(send[a].ptr, send[a].count * es, recv[b].ptr, recv[b].count * es)) stage = true;
    const std::string algo = select_algorithm("alltoall", total, size_, transport_);
    run(kOpAllToAll, dt, 0, 0, ReduceOp::kSum, "alltoall", total, algo, q, [&] {
      if (tcp_) {
        std::vector<const char*> ins(size_);
        std::vector<char*> outs(size_);
        std::vector<size_t> in_bytes(size_), out_bytes(size_);
        for (int r = 0; r < size_; ++r) {
          ins[r] = static_cast<const char*>(LocalMemory::alias(send[r].ptr));
          outs[r] = static_cast<char*>(LocalMemory::alias(recv[r].ptr));
          in_bytes[r] = send[r].count * es;
          out_bytes[r] = recv[r].count * es;
        }
        return tcp_ops_->all_to_all_v(wire(), ins, in_bytes, outs, out_bytes, stage);
      }
      Slot* s = slot(rank_);
      for (int r = 0; r < size_; ++r) {
        s->bufs[r] = refs[r];
        s->counts[r] = send[r].count;
      }
      enter(cur_);
      std::vector<size_t> offs(size_ + 1, 0);
      for (int r = 0; r < size_; ++r) {
        const uint64_t c = slot(r)->counts[rank_];
        if (c != recv[r].count) {
          fail(Error::kMismatch, "neuron_ccl: all_to_all #" + std::to_string(seq_) + ": rank " + std::to_string(r) +
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
        const char* src = peer(r, slot(r)->bufs[rank_], b);
        copy_bytes(stage ? tmp + offs[r] : static_cast<char*>(LocalMemory::alias(recv[r].ptr)), src, b);
      }
      sync("exchanged");
      if (stage)
        for (int r = 0; r < size_; ++r)
          if (recv[r].count) std::memcpy(LocalMemory::alias(recv[r].ptr), tmp + offs[r], recv[r].count * es);
    });
  }

  void gather(const void* send, size_t count, const std::vector<Buffer>& recv, DataType dt, int root, nsimQueue q) {
    check_root(root, "gather");
    const size_t es = dtype_size(dt);
    const RemoteRef sref = locate(send, count * es, "gather send");
    std::vector<RemoteRef> refs(size_);
    if (rank_ == root) {
      check_list(recv, "gather recv");
      for (int r = 0; r < size_; ++r) {
        if (recv[r].count != count) {
          throw Error(Error::kInvalidArgument, "neuron_ccl: gather on root " + std::to_string(root) + ": output " +
                                                   std::to_string(r) + " has " + std::to_string(recv[r].count) +
                                                   " elements, the input " + std::to_string(count));
        }
        refs[r] = locate(recv[r].ptr, count * es, "gather recv");
      }
    }
    const std::string algo = select_algorithm("gather", count * es * size_, size_, transport_);
    run(kOpGather, dt, count, root, ReduceOp::kSum, "gather", count * es * size_, algo, q, [&] {
      if (tcp_) {
        std::vector<char*> outs(size_);
        if (rank_ == root)
          for (int r = 0; r < size_; ++r) outs[r] = static_cast<char*>(LocalMemory::alias(recv[r].ptr));
        return tcp_ops_->gather(wire(), static_cast<const char*>(LocalMemory::alias(send)), count * es, outs, root);
      }
      Slot* s = slot(rank_);
      s->main[0] = sref;
      for (int r = 0; r < size_; ++r) s->bufs[r] = refs[r];
      enter(cur_);
      // Each rank writes its block into the root's output.
      if (count) {
        char* dst = peer(root, slot(root)->bufs[rank_], count * es);
        const char* src = static_cast<const char*>(LocalMemory::alias(send));
        if (dst != src) copy_bytes(dst, src, count * es);
      }
      sync("gathered");
    });
  }

  void scatter(const std::vector<Buffer>& send, void* recv, size_t count, DataType dt, int root, nsimQueue q) {
    check_root(root, "scatter");
    const size_t es = dtype_size(dt);
    const RemoteRef rref = locate(recv, count * es, "scatter recv");
    std::vector<RemoteRef> refs(size_);
    if (rank_ == root) {
      check_list(send, "scatter send");
      for (int r = 0; r < size_; ++r) {
        if (send[r].count != count) {
          throw Error(Error::kInvalidArgument, "neuron_ccl: scatter on root " + std::to_string(root) + ": input " +
                                                   std::to_string(r) + " has " + std::to_string(send[r].count) +
                                                   " elements, the output " + std::to_string(count));
        }
        refs[r] = locate(send[r].ptr, count * es, "scatter send");
      }
    }
    const std::string algo = select_algorithm("scatter", count * es * size_, size_, transport_);
    run(kOpScatter, dt, count, root, ReduceOp::kSum, "scatter", count * es * size_, algo, q, [&] {
      if (tcp_) {
        std::vector<const char*> ins(size_);
        if (rank_ == root)
          for (int r = 0; r < size_; ++r) ins[r] = static_cast<const char*>(LocalMemory::alias(send[r].ptr));
        return tcp_ops_->scatter(wire(), ins, static_cast<char*>(LocalMemory::alias(recv)), count * es, root);
      }
      Slot* s = slot(rank_);
      s->main[1] = rref;
      for (int r = 0; r < size_; ++r) s->bufs[r] = refs[r];
      enter(cur_);
      if (count) {
        const char* src = peer(root, slot(root)->bufs[rank_], count * es);
        char* dst = static_cast<char*>(LocalMemory::alias(recv));
        if (dst != src) copy_bytes(dst, src, count * es);
      }
      sync("scattered");
    });
  }

  void barrier(nsimQueue q) {
    const std::string algo = select_algorithm("barrier", 0, size_, transport_);
    run(kOpBarrier, DataType::kUInt8, 0, 0, ReduceOp::kSum, "barrier", 0, algo, q, [&] {
      if (tcp_) return tcp_ops_->barrier(wire());
      enter(cur_);
      sync("barrier");  // a second sync keeps descriptors stable until every rank has checked them
    });
  }

  // ---------------------------------------------------------------- point to point
  void send(const void* buf, size_t count, DataType dt, int peer_rank, int tag, nsimQueue q) {
    check_peer(peer_rank, "send");
    const size_t bytes = count * dtype_size(dt);
    const RemoteRef ref = locate(buf, bytes, "send");
    cur_ = OpDesc{seq_, 0, static_cast<int32_t>(dt), count, peer_rank, 0};
    const double ns = model_.duration_ns("send", bytes, 2, "direct");
    nsimLaunch(q ? q : default_queue(), p2p_name(true), NSIM_LAUNCH_COLLECTIVE, ns, nullptr, nullptr);
    if (tcp_) {
      FrameHeader h = wire();
      h.tag = tag;
      return p2p_guard([&] { tcp_ops_->send(h, static_cast<const char*>(LocalMemory::alias(buf)), bytes, peer_rank); });
    }
    Mailbox* m = mailbox(rank_, peer_rank);
    const uint64_t n = m->posted.load(std::memory_order_relaxed);
    wait_until([&] { return n - m->taken.load(std::memory_order_acquire) < uint64_t(kMailboxDepth); },
               [&] { return std::vector<int>{peer_rank}; }, "send: receiver's queue is full");
    m->ring[n % kMailboxDepth] = Message{tag, static_cast<int32_t>(dt), count, ref};
    m->posted.store(n + 1, std::memory_order_release);
  }

  void recv(void* buf, size_t count, DataType dt, int peer_rank, int tag, nsimQueue q) {
    check_peer(peer_rank, "recv");
    const size_t bytes = count * dtype_size(dt);
    locate(buf, bytes, "recv");
    cur_ = OpDesc{seq_, 0, static_cast<int32_t>(dt), count, peer_rank, 0};
    if (tcp_) {
      FrameHeader h = wire();
      h.tag = tag;
      p2p_guard([&] { tcp_ops_->recv(h, static_cast<char*>(LocalMemory::alias(buf)), bytes, peer_rank); });
      const double ns = model_.duration_ns("recv", bytes, 2, "direct");
      nsimLaunch(q ? q : default_queue(), p2p_name(false), NSIM_LAUNCH_COLLECTIVE, ns, nullptr, nullptr);
      return;
    }
    Mailbox* m = mailbox(peer_rank, rank_);
    const uint64_t n = m->taken.load(std::memory_order_relaxed);
    wait_until([&] { return m->posted.load(std::memory_order_acquire) > n; },
               [&] { return std::vector<int>{peer_rank}; }, "recv: waiting for the matching send");
    const Message msg = m->ring[n % kMailboxDepth];
    if (msg.tag != tag || msg.count != count || msg.dtype != static_cast<int32_t>(dt)) {
      fail(Error::kMismatch,
           "neuron_ccl: recv on rank " + std::to_string(rank_) + " from rank " + std::to_string(peer_rank) +
               " expected tag " + std::to_string(tag) + ", " + std::to_string(count) + " x " + dtype_name(dt) +
               " but the next message sent has tag " + std::to_string(msg.tag) + ", " + std::to_string(msg.count) +
               " x " + dtype_name(static_cast<DataType>(msg.dtype)) + "; messages between two ranks arrive in order");
    }
    if (bytes) copy_bytes(LocalMemory::alias(buf), peer(peer_rank, msg.buf, bytes), bytes);
    m->taken.store(n + 1, std::memory_order_release);
    const double ns = model_.duration_ns("recv", bytes, 2, "direct");
    nsimLaunch(q ? q : default_queue(), p2p_name(false), NSIM_LAUNCH_COLLECTIVE, ns, nullptr, nullptr);
  }

  void wait_sends(int peer_rank) {
    check_peer(peer_rank, "wait_sends");
    if (tcp_) return;  // a TCP send returns once the kernel holds the whole message
    Mailbox* m = mailbox(rank_, peer_rank);
    const uint64_t n = m->posted.load(std::memory_order_relaxed);
    wait_until([&] { return m->taken.load(std::memory_order_acquire) >= n; },
               [&] { return std::vector<int>{peer_rank}; }, "send: waiting for the receiver to take the message");
  }

  void abort(const std::string& reason) {
    const std::string msg = "communicator '" + opt_.name + "' aborted by rank " + std::to_string(rank_) + ": " + reason;
    broken_ = msg;
    publish_abort(msg);
  }

 private:
  template <class F>
  void p2p_guard(F f) {
    if (!broken_.empty()) {
      throw Error(Error::kAborted, "neuron_ccl: communicator '" + opt_.name + "' is unusable after an earlier error: " +
                                       broken_);
    }
    try {
      f();
    } catch (...) {
      note_failure(std::current_exception());
      throw;
    }
  }

  nsimQueue default_queue() {
    nsimQueue q = nullptr;
    nsimQueueGetDefault(opt_.device, &q);
    return q;
  }
  uint32_t p2p_name(bool is_send) {
    static uint32_t ids[2] = {0, 0};
    static std::once_flag once;
    std::call_once(once, [] {
      nsimRegisterName("neuron_ccl.send", &ids[0]);
      nsimRegisterName("neuron_ccl.recv", &ids[1]);
    });
    return ids[is_send ? 0 : 1];
  }
  void check_root(int root, const char* op) {
    if (root < 0 || root >= size_)
      throw Error(Error::kInvalidArgument, std::string("neuron_ccl ") + op + ": root " + std::to_string(root) +
                                               " is outside the communicator of size " + std::to_string(size_));
  }
  void check_peer(int p, const char* op) {
    if (p < 0 || p >= size_ || p == rank_)
      throw Error(Error::kInvalidArgument, std::string("neuron_ccl ") + op + ": peer " + std::to_string(p) +
                                               " is not another rank of the communicator of size " +
                                               std::to_string(size_) + " (this is rank " + std::to_string(rank_) + ")");
  }
  void check_list(const std::vector<Buffer>& v, const char* what) {
    if (int(v.size()) != size_)
      throw Error(Error::kInvalidArgument, std::string("neuron_ccl: ") + what + " has " + std::to_string(v.size()) +
                                               " buffers; it needs one per rank (" + std::to_string(size_) + ")");
  }

  std::shared_ptr<KVStore> store_;
  int rank_, size_;
  CommOptions opt_;
  int64_t spin_ = 100;
  FlightRecorder recorder_;
  InterconnectModel model_;
  LocalMemory local_;
  PeerMemory peer_mem_;
  std::vector<PeerInfo> peers_;
  char* seg_ = nullptr;
  size_t seg_bytes_ = 0, slots_off_ = 0, mail_off_ = 0;
  uint64_t step_ = 0, seq_ = 0;
  OpDesc cur_{};
  std::string broken_;
  bool dumped_ = false;
  std::vector<uint32_t> name_ids_;
  std::vector<char> scratch_;
  std::string transport_ = "shm";
  std::unique_ptr<TcpTransport> tcp_;
  std::unique_ptr<TcpCollectives> tcp_ops_;
  int stage_fd_ = -1;
  char* stage_ = nullptr;
  size_t stage_bytes_ = 0;
  uint64_t progress_ = 0;  // this rank's progress counter (mirrors its slot)
  uint64_t claimed_ = 0;   // header()->claim before the current operation (equal on every rank)
};

// ------------------------------------------------------------------ public wrapper
Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

std::shared_ptr<Communicator> Communicator::create(std::shared_ptr<KVStore> store, int rank, int size,
                                                   const CommOptions& options) {
  return std::shared_ptr<Communicator>(
      new Communicator(std::make_unique<CommunicatorImpl>(std::move(store), rank, size, options)));
}

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }
int Communicator::device() const { return impl_->device(); }
const std::string& Communicator::name() const { return impl_->name(); }
std::chrono::milliseconds Communicator::timeout() const { return impl_->timeout(); }
const std::string& Communicator::transport() const { return impl_->transport(); }
void Communicator::set_timeout(std::chrono::milliseconds t) { impl_->set_timeout(t); }
std::string Communicator::flight_record() const { return impl_->flight_record(); }
void Communicator::abort(const std::string& reason) { impl_->abort(reason); }

std::shared_ptr<Communicator> Communicator::split(int color, int key) {
  // Colors and keys travel through the store; a per-parent split counter keeps repeated
  // splits apart (every rank splits in the same order, as for any collective).
  auto store = impl_->store();
  const int n = impl_->size(), me = impl_->rank();
  const std::string base = "neuron_ccl/" + impl_->name() + "/split" + std::to_string(++split_count_) + "/";
  store->set(base + std::to_string(me), std::to_string(color) + " " + std::to_string(key));
  std::vector<std::pair<int, int>> members;  // (key, rank) of the ranks with our color
  for (int r = 0; r < n; ++r) {
    std::istringstream in(store->get(base + std::to_string(r)));
    int c, k;
    in >> c >> k;
    if (c == color && color >= 0) members.emplace_back(k, r);
  }
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].second == me) new_rank = int(i);
  CommOptions opt = impl_->options();
  opt.name = impl_->name() + ".split" + std::to_string(split_count_) + ".c" + std::to_string(color);
  opt.local_rank = -1;
  return create(store, new_rank, int(members.size()), opt);
}

void Communicator::all_reduce(const void* s, void* r, size_t c, DataType dt, Reduction red, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->all_reduce(s, r, c, dt, red, q);
}
void Communicator::broadcast(void* b, size_t c, DataType dt, int root, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->broadcast(b, c, dt, root, q);
}
void Communicator::reduce(const void* s, void* r, size_t c, DataType dt, Reduction red, int root, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->reduce(s, r, c, dt, red, root, q);
}
void Communicator::all_gather(const void* s, void* r, size_t c, DataType dt, nsimQueue q) {
  std::vector<Buffer> out(size());
  for (int i = 0; i < size(); ++i) out[i] = {static_cast<char*>(r) + size_t(i) * c * dtype_size(dt), c};
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->all_gather_v(s, c, out, dt, q, true);
}
void Communicator::all_gather_v(const void* s, size_t sc, const std::vector<Buffer>& r, DataType dt, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->all_gather_v(s, sc, r, dt, q, false);
}
void Communicator::reduce_scatter(const void* s, void* r, size_t c, DataType dt, Reduction red, nsimQueue q) {
  std::vector<Buffer> in(size());
  for (int i = 0; i < size(); ++i)
    in[i] = {const_cast<char*>(static_cast<const char*>(s)) + size_t(i) * c * dtype_size(dt), c};
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->reduce_scatter_v(in, r, c, dt, red, q);
}
void Communicator::reduce_scatter_v(const std::vector<Buffer>& s, void* r, size_t c, DataType dt, Reduction red,
                                    nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->reduce_scatter_v(s, r, c, dt, red, q);
}
void Communicator::all_to_all_v(const std::vector<Buffer>& s, const std::vector<Buffer>& r, DataType dt, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->all_to_all_v(s, r, dt, q);
}
void Communicator::gather(const void* s, size_t c, const std::vector<Buffer>& r, DataType dt, int root, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->gather(s, c, r, dt, root, q);
}
void Communicator::scatter(const std::vector<Buffer>& s, void* r, size_t c, DataType dt, int root, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->scatter(s, r, c, dt, root, q);
}
void Communicator::barrier(nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->barrier(q);
}
void Communicator::send(const void* b, size_t c, DataType dt, int p, int tag, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->send(b, c, dt, p, tag, q);
}
void Communicator::recv(void* b, size_t c, DataType dt, int p, int tag, nsimQueue q) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->recv(b, c, dt, p, tag, q);
}
void Communicator::wait_sends(int p) {
  std::lock_guard<std::mutex> lock(op_mu_);
  impl_->wait_sends(p);
}

}  // namespace neuron_ccl
