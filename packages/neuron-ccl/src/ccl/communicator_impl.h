// The communicator object behind the public Communicator (one per communicator and rank).
// communicator.cpp: creation (rendezvous, transport choice) and the public wrapper;
// communicator_collectives.cpp: every operation's argument checks, algorithm selection and
// hand-off to the transport. An operation runs inside run(): one launch on its queue, with the
// interconnect model's duration, and one flight-recorder entry.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env.h"
#include "flight_recorder.h"
#include "interconnect_model.h"
#include "neuron_ccl/neuron_ccl.h"
#include "op_descriptor.h"
#include "peer_memory.h"
#include "shm_collectives.h"
#include "shm_transport.h"
#include "tcp_collectives.h"
#include "tcp_transport.h"

namespace neuron_ccl {

class CommunicatorImpl {
 public:
  CommunicatorImpl(std::shared_ptr<KVStore> store, int rank, int size, const CommOptions& opt)
      : store_(std::move(store)), rank_(rank), size_(size), opt_(opt),
        recorder_(size_t(std::max<int64_t>(1, env_int("NEURON_CCL_FLIGHT_RECORDER_SIZE")))) {
    if (size < 1 || rank < 0 || rank >= size) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: rank " + std::to_string(rank) +
                                               " is outside a communicator of size " + std::to_string(size));
    }
    if (size > kShmMaxRanks) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: " + std::to_string(size) +
                                               " ranks exceed the shared-memory transport's limit of " +
                                               std::to_string(kShmMaxRanks) + " ranks per host");
    }
    if (const int64_t t = env_int("NEURON_CCL_TIMEOUT_MS")) opt_.timeout = std::chrono::milliseconds(t);
    bootstrap();
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
    if (shm_) shm_->set_timeout(t);
  }
  std::shared_ptr<KVStore> store() const { return store_; }
  const CommOptions& options() const { return opt_; }
  std::string flight_record() const { return recorder_.dump(dump_header()); }

  // ---------------------------------------------------------------- bootstrap
  // Every rank publishes where it runs; the transport follows (shm on one host unless
  // NEURON_CCL_TRANSPORT=tcp), and so does the link class the interconnect model costs.
  void bootstrap();

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
    if (shm_) shm_->publish_abort(msg);
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
    // The record keeps the bytes and the algorithm, which profilers show on the device lane.
    nsimLaunchCost cost{};
    cost.model = NSIM_MODEL_INTERCONNECT;
    cost.dtype_class = NSIM_DTYPE_NONE;
    cost.duration_ns = ns;
    cost.bytes_read = cost.bytes_written = static_cast<double>(model_bytes);
    char detail_name[96];
    std::snprintf(detail_name, sizeof detail_name, "algo=%s bytes=%zu ranks=%d", algo.c_str(), model_bytes, size_);
    nsimRegisterName(detail_name, &cost.detail_id);
    const nsimError err =
        nsimLaunchWithCost(queue, name_id(op), NSIM_LAUNCH_COLLECTIVE, &cost, trampoline, &ctx, nullptr);
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

  uint32_t name_id(int32_t op) {
    if (name_ids_.empty()) {
      name_ids_.resize(kOpBarrier + 1);
      for (int i = 1; i <= kOpBarrier; ++i)
        nsimRegisterName((std::string("neuron_ccl.") + op_name(i)).c_str(), &name_ids_[i]);
    }
    return name_ids_[op];
  }

  RemoteRef locate(const void* p, size_t bytes, const char* what) {
    if (bytes == 0) return {};
    return local_.locate(p, bytes, what);
  }

  char* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  static const char* host(const void* p) { return static_cast<const char*>(LocalMemory::alias(p)); }
  static char* host(void* p) { return static_cast<char*>(LocalMemory::alias(p)); }

  // ---------------------------------------------------------------- collectives
  void all_reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, nsimQueue q);

  void broadcast(void* buf, size_t count, DataType dt, int root, nsimQueue q);

  void reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, int root, nsimQueue q);

  void all_gather_v(const void* send, size_t send_count, const std::vector<Buffer>& recv, DataType dt,
                    nsimQueue q, bool uniform);

  void reduce_scatter_v(const std::vector<Buffer>& send, void* recv, size_t recv_count, DataType dt,
                        Reduction red, nsimQueue q);

  void all_to_all_v(const std::vector<Buffer>& send, const std::vector<Buffer>& recv, DataType dt, nsimQueue q);

  void gather(const void* send, size_t count, const std::vector<Buffer>& recv, DataType dt, int root, nsimQueue q);

  void scatter(const std::vector<Buffer>& send, void* recv, size_t count, DataType dt, int root, nsimQueue q);

  void barrier(nsimQueue q);

  // ---------------------------------------------------------------- point to point
  // A send is placed on the timeline when it is posted, a recv once its data arrived.
  void send(const void* buf, size_t count, DataType dt, int peer_rank, int tag, nsimQueue q);

  void recv(void* buf, size_t count, DataType dt, int peer_rank, int tag, nsimQueue q);

  void wait_sends(int peer_rank);

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
  FlightRecorder recorder_;
  InterconnectModel model_;
  LocalMemory local_;
  uint64_t seq_ = 0;
  OpDesc cur_{};
  std::string broken_;
  bool dumped_ = false;
  std::vector<uint32_t> name_ids_;
  std::vector<char> scratch_;
  std::string transport_ = "shm";
  std::unique_ptr<ShmTransport> shm_;
  std::unique_ptr<ShmCollectives> shm_ops_;
  std::unique_ptr<TcpTransport> tcp_;
  std::unique_ptr<TcpCollectives> tcp_ops_;
};

}  // namespace neuron_ccl
