// The communicator: creation and the public wrapper (one operation at a time per communicator).
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "communicator_impl.h"
#include "env.h"
#include "rendezvous.h"

namespace neuron_ccl {

void CommunicatorImpl::bootstrap() {
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
    ShmTransport::Hooks hooks{
        [this] { return current_op(); },
        [this](Error::Kind kind, const std::string& msg) { fail(kind, msg); },
        [this](const std::string& msg) {
          broken_ = msg;
          dump_record();
        }};
    shm_ = std::make_unique<ShmTransport>(local_, rank_, size_, opt_.name, opt_.timeout, std::move(hooks));
    me.fds.emplace_back(shm_->staging_fd(), shm_->staging_bytes());
  }
  const Rendezvous meet = rendezvous(*store_, prefix, opt_.name, rank_, size_, me, opt_.local_rank, opt_.device);
  model_.init(opt_.device, meet.link);
  if (meet.use_tcp) {
    transport_ = "tcp";
    tcp_ = std::make_unique<TcpTransport>(*store_, prefix, rank_, size_, meet.other_host < 0, opt_.timeout, [this] {
      return current_op() + " of communicator '" + opt_.name + "'";
    });
    tcp_ops_ = std::make_unique<TcpCollectives>(*tcp_, rank_, size_, [](const FrameHeader& h) {
      return describe(OpDesc{h.seq, h.op, h.dtype, h.count, h.root, h.redop});
    }, size_t(std::max<int64_t>(4096, env_int("NEURON_CCL_RING_SLICE_BYTES"))));
    shm_.reset();  // ranks on other hosts cannot map the staging memory
    return;
  }
  std::vector<int> pids(size_);
  std::vector<std::vector<std::pair<int, uint64_t>>> fds(size_);
  for (int r = 0; r < size_; ++r) {
    pids[r] = meet.peers[r].pid;
    fds[r] = meet.peers[r].fds;
  }
  shm_->connect(*store_, prefix, pids, fds);
  shm_ops_ = std::make_unique<ShmCollectives>(*shm_, rank_, size_);
}

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

