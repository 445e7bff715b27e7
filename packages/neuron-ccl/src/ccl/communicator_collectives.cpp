// Every operation of the communicator: argument checks (ranks, roots, sizes, reductions),
// algorithm selection, then the transport's implementation inside run().
#include <algorithm>

#include "communicator_impl.h"
#include "env.h"
#include "reduce.h"
#include "shm_algorithms.h"

namespace neuron_ccl {

void CommunicatorImpl::all_reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, nsimQueue q) {
  check_reduction(dt, red, "all_reduce");
  const size_t es = dtype_size(dt), bytes = count * es;
  const std::string algo = select_algorithm("allreduce", bytes, size_, transport_);
  const RemoteRef sref = locate(send, bytes, "all_reduce send");
  const RemoteRef rref = locate(recv, bytes, "all_reduce recv");
  RemoteRef stage{};
  const size_t ring_slice = size_t(std::max<int64_t>(64, env_int("NEURON_CCL_RING_SLICE_BYTES")));
  if (algo == "ring" && !tcp_) stage = shm_->staging_ref(ring_staging_bytes(count, dt, size_, ring_slice), "ring");
  if (algo == "rdouble" && !is_power_of_two(size_)) {
    throw Error(Error::kInvalidArgument, "neuron_ccl: all_reduce: NEURON_CCL_ALGO forces rdouble (recursive "
                                         "doubling), which needs a power-of-two rank count, not " +
                                             std::to_string(size_));
  }
  if (algo == "rdouble" && !tcp_)
    stage = shm_->staging_ref(recursive_doubling_staging_bytes(count, dt, size_), "rdouble");
  run(kOpAllReduce, dt, count, 0, red.op, "allreduce", bytes, algo, q, [&] {
    if (tcp_) return tcp_ops_->all_reduce(wire(), host(send), host(recv), count, dt, red, algo);
    shm_ops_->all_reduce(cur_, host(send), host(recv), sref, rref, stage, count, dt, red, algo, ring_slice);
  });
}

void CommunicatorImpl::broadcast(void* buf, size_t count, DataType dt, int root, nsimQueue q) {
  check_root(root, "broadcast");
  const size_t bytes = count * dtype_size(dt);
  const RemoteRef ref = locate(buf, bytes, "broadcast");
  const std::string algo = select_algorithm("broadcast", bytes, size_, transport_);
  run(kOpBroadcast, dt, count, root, ReduceOp::kSum, "broadcast", bytes, algo, q, [&] {
    if (tcp_) return tcp_ops_->broadcast(wire(), host(buf), bytes, root);
    shm_ops_->broadcast(cur_, host(buf), ref, bytes, root);
  });
}

void CommunicatorImpl::reduce(const void* send, void* recv, size_t count, DataType dt, Reduction red, int root, nsimQueue q) {
  check_root(root, "reduce");
  check_reduction(dt, red, "reduce");
  const size_t bytes = count * dtype_size(dt);
  const RemoteRef sref = locate(send, bytes, "reduce send");
  const RemoteRef rref = rank_ == root ? locate(recv, bytes, "reduce recv") : RemoteRef{};
  const std::string algo = select_algorithm("reduce", bytes, size_, transport_);
  run(kOpReduce, dt, count, root, red.op, "reduce", bytes, algo, q, [&] {
    if (tcp_) {
      // A ring all-reduce whose result non-roots drop: bandwidth-optimal, and the root's
      // result has the same bits as an all-reduce.
      char* out = rank_ == root ? host(recv) : scratch(bytes);
      return tcp_ops_->all_reduce(wire(), host(send), out, count, dt, red, "ring");
    }
    shm_ops_->reduce(cur_, sref, rref, count, dt, red, root);
  });
}

void CommunicatorImpl::all_gather_v(const void* send, size_t send_count, const std::vector<Buffer>& recv, DataType dt,
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
        outs[r] = host(recv[r].ptr);
        out_bytes[r] = recv[r].count * es;
      }
      return tcp_ops_->all_gather_v(wire(), host(send), send_count * es, outs, out_bytes);
    }
    shm_ops_->all_gather_v(cur_, sref, send_count, recv, dt);
  });
}

void CommunicatorImpl::reduce_scatter_v(const std::vector<Buffer>& send, void* recv, size_t recv_count, DataType dt,
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
      for (int r = 0; r < size_; ++r) ins[r] = host(send[r].ptr);
      return tcp_ops_->reduce_scatter(wire(), ins, host(recv), recv_count, dt, red);
    }
    shm_ops_->reduce_scatter(cur_, refs, host(recv), recv_count, dt, red);
  });
}

void CommunicatorImpl::all_to_all_v(const std::vector<Buffer>& send, const std::vector<Buffer>& recv, DataType dt, nsimQueue q) {
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
        ins[r] = host(send[r].ptr);
        outs[r] = host(recv[r].ptr);
        in_bytes[r] = send[r].count * es;
        out_bytes[r] = recv[r].count * es;
      }
      return tcp_ops_->all_to_all_v(wire(), ins, in_bytes, outs, out_bytes, stage);
    }
    shm_ops_->all_to_all_v(cur_, refs, send, recv, dt, stage);
  });
}

void CommunicatorImpl::gather(const void* send, size_t count, const std::vector<Buffer>& recv, DataType dt, int root, nsimQueue q) {
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
        for (int r = 0; r < size_; ++r) outs[r] = host(recv[r].ptr);
      return tcp_ops_->gather(wire(), host(send), count * es, outs, root);
    }
    shm_ops_->gather(cur_, host(send), sref, count * es, refs, root);
  });
}

void CommunicatorImpl::scatter(const std::vector<Buffer>& send, void* recv, size_t count, DataType dt, int root, nsimQueue q) {
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
        for (int r = 0; r < size_; ++r) ins[r] = host(send[r].ptr);
      return tcp_ops_->scatter(wire(), ins, host(recv), count * es, root);
    }
    shm_ops_->scatter(cur_, host(recv), rref, count * es, refs, root);
  });
}

void CommunicatorImpl::barrier(nsimQueue q) {
  const std::string algo = select_algorithm("barrier", 0, size_, transport_);
  run(kOpBarrier, DataType::kUInt8, 0, 0, ReduceOp::kSum, "barrier", 0, algo, q, [&] {
    if (tcp_) return tcp_ops_->barrier(wire());
    shm_ops_->barrier(cur_);
  });
}

void CommunicatorImpl::send(const void* buf, size_t count, DataType dt, int peer_rank, int tag, nsimQueue q) {
  check_peer(peer_rank, "send");
  const size_t bytes = count * dtype_size(dt);
  const RemoteRef ref = locate(buf, bytes, "send");
  cur_ = OpDesc{seq_, 0, static_cast<int32_t>(dt), count, peer_rank, 0};
  const double ns = model_.duration_ns("send", bytes, 2, "direct");
  nsimLaunch(q ? q : default_queue(), p2p_name(true), NSIM_LAUNCH_COLLECTIVE, ns, nullptr, nullptr);
  if (tcp_) {
    FrameHeader h = wire();
    h.tag = tag;
    return p2p_guard([&] { tcp_ops_->send(h, host(buf), bytes, peer_rank); });
  }
  shm_ops_->send(ref, count, dt, peer_rank, tag);
}

void CommunicatorImpl::recv(void* buf, size_t count, DataType dt, int peer_rank, int tag, nsimQueue q) {
  check_peer(peer_rank, "recv");
  const size_t bytes = count * dtype_size(dt);
  locate(buf, bytes, "recv");
  cur_ = OpDesc{seq_, 0, static_cast<int32_t>(dt), count, peer_rank, 0};
  if (tcp_) {
    FrameHeader h = wire();
    h.tag = tag;
    p2p_guard([&] { tcp_ops_->recv(h, host(buf), bytes, peer_rank); });
  } else {
    shm_ops_->recv(host(buf), count, dt, peer_rank, tag);
  }
  const double ns = model_.duration_ns("recv", bytes, 2, "direct");
  nsimLaunch(q ? q : default_queue(), p2p_name(false), NSIM_LAUNCH_COLLECTIVE, ns, nullptr, nullptr);
}

void CommunicatorImpl::wait_sends(int peer_rank) {
  check_peer(peer_rank, "wait_sends");
  if (tcp_) return;  // a TCP send returns once the kernel holds the whole message
  shm_ops_->wait_sends(peer_rank);
}
}  // namespace neuron_ccl
