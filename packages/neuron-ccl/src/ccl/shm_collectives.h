// Collectives over the shared-memory transport (ranks on one host): the direct algorithms
// (oneshot / twoshot all-reduce, rooted and personalised operations, single copy from the
// peers' published buffers) and point-to-point messages through the mailboxes; the ring and
// recursive doubling all-reduces are in shm_algorithms.h. Every call starts with
// ShmTransport::enter (descriptors checked) and ends with a sync, so that no rank leaves while
// a peer still reads its buffers. `send`/`recv` arguments are host addresses (the device
// memory's host alias) with their RemoteRefs for the peers.
#pragma once

#include <string>
#include <vector>

#include "neuron_ccl/neuron_ccl.h"
#include "op_descriptor.h"
#include "shm_transport.h"

namespace neuron_ccl {

class ShmCollectives {
 public:
  ShmCollectives(ShmTransport& t, int rank, int size) : t_(t), rank_(rank), size_(size) {}

  // `stage`: staging memory for ring / rdouble; `ring_slice`: the ring's slice bytes.
  void all_reduce(const OpDesc& d, const char* send, char* recv, const RemoteRef& sref, const RemoteRef& rref,
                  const RemoteRef& stage, size_t count, DataType dt, const Reduction& red, const std::string& algo,
                  size_t ring_slice);
  void broadcast(const OpDesc& d, char* buf, const RemoteRef& ref, size_t bytes, int root);
  // `rref` is the root's output (empty on the other ranks).
  void reduce(const OpDesc& d, const RemoteRef& sref, const RemoteRef& rref, size_t count, DataType dt,
              const Reduction& red, int root);
  void all_gather_v(const OpDesc& d, const RemoteRef& sref, size_t send_count, const std::vector<Buffer>& recv,
                    DataType dt);
  // `in[r]`: the block for rank r.
  void reduce_scatter(const OpDesc& d, const std::vector<RemoteRef>& in, char* recv, size_t recv_count, DataType dt,
                      const Reduction& red);
  // `stage`: an input overlaps an output, so incoming blocks wait in scratch until every peer read.
  void all_to_all_v(const OpDesc& d, const std::vector<RemoteRef>& in, const std::vector<Buffer>& send,
                    const std::vector<Buffer>& recv, DataType dt, bool stage);
  // `outs[r]`: the root's output for rank r (empty on the other ranks).
  void gather(const OpDesc& d, const char* send, const RemoteRef& sref, size_t bytes,
              const std::vector<RemoteRef>& outs, int root);
  // `ins[r]`: the root's input for rank r (empty on the other ranks).
  void scatter(const OpDesc& d, char* recv, const RemoteRef& rref, size_t bytes, const std::vector<RemoteRef>& ins,
               int root);
  void barrier(const OpDesc& d);

  // Messages between two ranks arrive in order; a send returns once the message is posted
  // (the receiver copies from the sender's buffer), wait_sends once the receiver took them all.
  void send(const RemoteRef& ref, size_t count, DataType dt, int peer, int tag);
  void recv(char* buf, size_t count, DataType dt, int peer, int tag);
  void wait_sends(int peer);

 private:
  char* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  ShmTransport& t_;
  int rank_, size_;
  std::vector<char> scratch_;
};

}  // namespace neuron_ccl
