// Modelled device duration of a collective on Trainium, placed on the caller's neuron_sim
// queue so that projected step time includes communication.
//
// Links, per rank (sources: shared/facts/trainium-and-torchneuron.md):
// - ranks on one chip: the copy reads and writes the core's HBM share, so the rate is half of
//   nsimDeviceProperties::hbm_bandwidth (trn2: 2.9 TB/s per chip over 4 logical cores, §5.1);
// - ranks on different chips of one host: one NeuronLink of the chip's four,
//   chip_link_bandwidth / 4 (trn2 NeuronLink-v3 1.28 TB/s per chip over 4 links, §5.1), shared by
//   the chip's logical cores;
// - ranks on different hosts: the instance's EFA share per chip (trn2.48xlarge EFAv3
//   3,200 Gbps for 16 chips, §5.3), shared by the chip's logical cores.
// Per-step latency: the profile's DMA fixed overhead on one chip (§5.2: ~600 ns per DGE DMA);
// no Neuron per-hop figure is published, so NCCL's per-hop latencies stand in across chips
// (LL128 ~2 us) and hosts (Simple ~6 us) (collectives.md §4.2).
#pragma once

#include <cstddef>
#include <string>

namespace neuron_ccl {

enum class LinkClass { kSameChip = 0, kSameHost = 1, kCrossHost = 2 };

struct LinkParams {
  double bandwidth = 0;   // bytes/s per rank
  double latency_ns = 0;  // per algorithm step
};

class InterconnectModel {
 public:
  // props of this rank's device; `link` is the slowest link class among the ranks.
  void init(int device, LinkClass link);
  const LinkParams& link() const { return link_; }
  // Duration of `op` ("allreduce", "allgather", ...) over `bytes` (nccl-tests convention: total
  // buffer size, all-gather output / reduce-scatter input) with `ranks` ranks and `algo`.
  double duration_ns(const std::string& op, size_t bytes, int ranks, const std::string& algo) const;

 private:
  LinkParams link_;
};

}  // namespace neuron_ccl
