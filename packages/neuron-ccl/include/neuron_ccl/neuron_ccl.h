// neuron_ccl: collective communication over neuron_sim device buffers.
//
// A Communicator joins `size` processes (ranks), each using one neuron_sim device. It is
// bootstrapped through a key-value store (the c10d Store when used from PyTorch, a TCP or file
// store standalone). Ranks on one host exchange data through shared memory: every rank maps the
// memfd that backs each peer's device memory, so a collective reads peer buffers directly
// (single copy) and the buffers are reused across operations instead of re-faulted.
// Ranks on different hosts (or every rank, with NEURON_CCL_TRANSPORT=tcp) exchange data over
// TCP connections between every pair of ranks instead.
//
// Execution model (as neuron_sim): an operation runs synchronously on the calling thread and,
// in addition, occupies the caller's queue on the simulated timeline for the duration the
// interconnect model (interconnect_model.h) predicts. When a call returns, its result is in
// memory on every rank that returned.
//
// Errors: every operation has a timeout. A rank that detects a failure (timeout, a peer that
// exited, a peer calling a different collective or with a different size/dtype) marks the
// communicator aborted with a message naming the ranks and the operation, so every other rank
// fails within one polling interval instead of hanging. After an error the communicator is
// unusable. The last operations of each rank are kept in a flight recorder that is printed
// with the error.
#ifndef NEURON_CCL_H
#define NEURON_CCL_H

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <neuron_sim/neuron_sim.h>

namespace neuron_ccl {

enum class DataType : int {
  kFloat32 = 0, kFloat64, kFloat16, kBFloat16,
  kInt8, kUInt8, kInt16, kInt32, kInt64, kBool,
  kCount_
};
size_t dtype_size(DataType t);
const char* dtype_name(DataType t);
DataType dtype_from_name(const std::string& name);  // "float32", "bfloat16", ...

enum class ReduceOp : int { kSum = 0, kProduct, kMin, kMax, kAvg, kPremulSum, kBand, kBor, kBxor, kCount_ };
const char* reduce_op_name(ReduceOp op);
ReduceOp reduce_op_from_name(const std::string& name);

struct Reduction {
  ReduceOp op = ReduceOp::kSum;
  double premul_factor = 1.0;  // used by kPremulSum only
};

// Raised by every failing call. `kind` lets callers tell timeouts and peer failures apart.
class Error : public std::runtime_error {
 public:
  enum Kind { kInvalidArgument, kTimeout, kPeerFailure, kMismatch, kAborted, kSystem };
  Error(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// The bootstrap key-value store. get() blocks until the key exists or the store's own timeout
// passes (then it throws).
class KVStore {
 public:
  virtual ~KVStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key) = 0;
};

// A TCP key-value store: rank 0 (is_server) serves, every rank connects. For standalone use.
std::shared_ptr<KVStore> make_tcp_store(const std::string& host, int port, bool is_server,
                                        std::chrono::milliseconds timeout);

struct CommOptions {
  int device = 0;                                // neuron_sim device this rank uses
  int local_rank = -1;                           // rank on this host (-1: derive from the store)
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  std::string name = "default";                  // shown in errors and the flight recorder
};

// One entry of an uneven (v) collective: device pointer and element count.
struct Buffer {
  void* ptr = nullptr;
  size_t count = 0;
};

class CommunicatorImpl;

class Communicator {
 public:
  // Collective over all `size` ranks: every rank calls with the same store prefix.
  static std::shared_ptr<Communicator> create(std::shared_ptr<KVStore> store, int rank, int size,
                                              const CommOptions& options);
  ~Communicator();

  int rank() const;
  int size() const;
  int device() const;
  const std::string& name() const;
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds t);
  // "shm" (every rank on this host, through shared memory) or "tcp" (sockets between ranks);
  // chosen at creation from the hosts and NEURON_CCL_TRANSPORT.
  const std::string& transport() const;

  // Ranks with the same color form a new communicator, ordered by (key, rank). color < 0: the
  // rank joins none and gets nullptr. Collective over this communicator.
  std::shared_ptr<Communicator> split(int color, int key);

  // Every pointer below is a neuron_sim device address; `queue` (may be null: the device's
  // default queue) is where the operation is placed on the simulated timeline. Counts are in
  // elements. send == recv is allowed (in place) wherever a rank has both.
  void all_reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red,
                  nsimQueue queue);
  void broadcast(void* buf, size_t count, DataType dt, int root, nsimQueue queue);
  void reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, int root,
              nsimQueue queue);
  // recv holds size()*count elements; rank r's block lands at offset r*count.
  void all_gather(const void* send, void* recv, size_t count, DataType dt, nsimQueue queue);
  // Uneven/list form: rank r's send (send_count elements) lands in recv[r] on every rank.
  void all_gather_v(const void* send, size_t send_count, const std::vector<Buffer>& recv,
                    DataType dt, nsimQueue queue);
  // send holds size()*count elements; rank r receives the reduction of block r.
  void reduce_scatter(const void* send, void* recv, size_t count, DataType dt, Reduction red,
                      nsimQueue queue);
  // List form: send[q] is the block for rank q (send[q].count == recv_count for all q).
  void reduce_scatter_v(const std::vector<Buffer>& send, void* recv, size_t recv_count,
                        DataType dt, Reduction red, nsimQueue queue);
  // send[q] goes to rank q; recv[q] comes from rank q (counts must agree pairwise).
  void all_to_all_v(const std::vector<Buffer>& send, const std::vector<Buffer>& recv, DataType dt,
                    nsimQueue queue);
  // recv (root only, size() entries) receives each rank's send.
  void gather(const void* send, size_t count, const std::vector<Buffer>& recv, DataType dt,
              int root, nsimQueue queue);
  // send (root only, size() entries) is split to every rank's recv.
  void scatter(const std::vector<Buffer>& send, void* recv, size_t count, DataType dt, int root,
               nsimQueue queue);
  void barrier(nsimQueue queue);
  // Point to point. send() returns once the message is posted; wait_sends() blocks until every
  // posted send to `peer` was received. recv() blocks until the message arrived.
  void send(const void* buf, size_t count, DataType dt, int peer, int tag, nsimQueue queue);
  void recv(void* buf, size_t count, DataType dt, int peer, int tag, nsimQueue queue);
  void wait_sends(int peer);

  // Marks the communicator failed on every rank (e.g. from c10d abort()).
  void abort(const std::string& reason);
  // The flight recorder as text (newest last).
  std::string flight_record() const;

 private:
  explicit Communicator(std::unique_ptr<CommunicatorImpl> impl);
  std::unique_ptr<CommunicatorImpl> impl_;
  int split_count_ = 0;
  std::mutex op_mu_;  // operations from several threads (autograd's device thread) run one at a time
};

// Which algorithm a call of `op` ("allreduce", "allgather", "reducescatter", "reduce",
// "broadcast", "alltoall", "gather", "scatter", "barrier") over `bytes` on `ranks` uses with
// `transport` ("shm" or "tcp"; the first overload: "shm"). NEURON_CCL_ALGO overrides, e.g.
// "allreduce=ring"; a name that the transport lacks throws Error(kInvalidArgument).
std::string select_algorithm(const std::string& op, size_t bytes, int ranks);
std::string select_algorithm(const std::string& op, size_t bytes, int ranks, const std::string& transport);

}  // namespace neuron_ccl

#endif  // NEURON_CCL_H
