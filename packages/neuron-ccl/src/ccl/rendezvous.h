// What the ranks of a new communicator learn about each other through the store: where each
// runs (host, pid, device memory to map), which transport it asked for, and which chip of the
// modelled instance its core is on, hence the link class the interconnect model costs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "interconnect_model.h"
#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {

struct PeerInfo {
  std::string transport;  // NEURON_CCL_TRANSPORT of that rank
  std::string host;
  int pid = 0;
  int local_rank = 0;
  int device = 0;
  int chip = 0;
  std::vector<std::pair<int, uint64_t>> fds;  // memfds to map: the devices', then staging
};

// This host and boot: ranks with equal identities can map each other's memory.
std::string host_identity();

struct Rendezvous {
  std::vector<PeerInfo> peers;  // by rank, chips filled in
  int other_host = -1;          // a rank on another host, or -1
  bool use_tcp = false;         // NEURON_CCL_TRANSPORT=tcp, or ranks on several hosts
  LinkClass link = LinkClass::kSameChip;
};

// Publishes `me` under `prefix` and reads every rank's; throws Error(kInvalidArgument) when the
// ranks asked for different transports, or for shm across hosts. `local_rank` < 0: the
// position among the ranks of this host.
Rendezvous rendezvous(KVStore& store, const std::string& prefix, const std::string& name, int rank, int size,
                      const PeerInfo& me, int local_rank, int device);

}  // namespace neuron_ccl
