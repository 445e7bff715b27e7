#include "rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "neuron_sim/neuron_sim.h"

namespace neuron_ccl {
namespace {

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

std::string host_identity() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot;
}

Rendezvous rendezvous(KVStore& store, const std::string& prefix, const std::string& name, int rank, int size,
                      const PeerInfo& me, int given_local_rank, int device) {
  store.set(prefix + "info/" + std::to_string(rank), encode_info(me));
  Rendezvous m;
  m.peers.resize(size);
  for (int r = 0; r < size; ++r) m.peers[r] = decode_info(store.get(prefix + "info/" + std::to_string(r)));
  // Local rank = position among the ranks of this host unless the caller knows it (LOCAL_RANK).
  int local = 0;
  int other_host = -1;
  for (int r = 0; r < size; ++r) {
    if (m.peers[r].transport != me.transport) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: communicator '" + name + "': rank " +
                                               std::to_string(rank) + " has NEURON_CCL_TRANSPORT=" + me.transport +
                                               " but rank " + std::to_string(r) + " has " + m.peers[r].transport +
                                               "; every rank must use the same transport");
    }
    if (m.peers[r].host != me.host) {
      other_host = r;
      continue;
    }
    if (r < rank) ++local;
  }
  if (other_host >= 0 && me.transport == "shm") {
    throw Error(Error::kInvalidArgument,
                "neuron_ccl: communicator '" + name + "' spans hosts (rank " + std::to_string(rank) + " on " +
                    me.host + ", rank " + std::to_string(other_host) + " on " + m.peers[other_host].host +
                    ") but NEURON_CCL_TRANSPORT=shm needs every rank on one host; use auto or tcp");
  }
  m.use_tcp = me.transport == "tcp" || other_host >= 0;
  m.other_host = other_host;
  const int local_rank = given_local_rank >= 0 ? given_local_rank : local;
  nsimDeviceProperties props{};
  nsimGetDeviceProperties(device, &props);
  const int cores = std::max(1, props.logical_cores_per_chip);
  // The chip a rank's core belongs to on the modelled instance: torchrun places local rank l
  // on logical core l, so ranks 0..cores-1 share chip 0.
  const int my_chip = local_rank / cores;
  store.set(prefix + "chip/" + std::to_string(rank), std::to_string(my_chip));
  m.link = LinkClass::kSameChip;
  for (int r = 0; r < size; ++r) {
    m.peers[r].chip = std::stoi(store.get(prefix + "chip/" + std::to_string(r)));
    if (m.peers[r].chip != my_chip) m.link = LinkClass::kSameHost;
  }
  if (other_host >= 0) m.link = LinkClass::kCrossHost;
  return m;
}

}  // namespace neuron_ccl
