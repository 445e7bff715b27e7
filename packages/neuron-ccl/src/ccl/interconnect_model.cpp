#include "interconnect_model.h"

#include <cmath>

#include <neuron_sim/neuron_sim.h>

namespace neuron_ccl {

void InterconnectModel::init(int device, LinkClass link) {
  nsimDeviceProperties p{};
  nsimGetDeviceProperties(device, &p);
  const int cores = p.logical_cores_per_chip > 0 ? p.logical_cores_per_chip : 1;
  constexpr double kNeuronLinksPerChip = 4;             // §5.1, all three generations
  constexpr double kEfaBytesPerChip = 3200e9 / 8 / 16;  // trn2.48xlarge, §5.3
  constexpr double kCrossChipHopNs = 2000;              // NCCL LL128 per hop, collectives.md §4.2
  constexpr double kCrossHostHopNs = 6000;              // NCCL Simple per hop, collectives.md §4.2
  switch (link) {
    case LinkClass::kSameChip:
      link_ = {p.hbm_bandwidth / 2, p.dma_fixed_overhead_ns};
      break;
    case LinkClass::kSameHost:
      link_ = {p.chip_link_bandwidth / kNeuronLinksPerChip / cores, kCrossChipHopNs};
      break;
    case LinkClass::kCrossHost:
      link_ = {kEfaBytesPerChip / cores, kCrossHostHopNs};
      break;
  }
  if (link_.bandwidth <= 0) link_.bandwidth = 1e9;
}

double InterconnectModel::duration_ns(const std::string& op, size_t bytes, int n,
                                      const std::string& algo) const {
  if (n <= 1) return link_.latency_ns;
  const double S = double(bytes), a = link_.latency_ns, beta = link_.bandwidth / 1e9;  // B/ns
  const double frac = double(n - 1) / n;
  if (op == "allreduce") {
    if (algo == "oneshot") return 2 * a + (n - 1) * S / beta;        // every rank reads all peers
    if (algo == "twoshot") return 2 * a + 2 * frac * S / beta;       // direct RS + AG in one pass
    if (algo == "rdouble") {                                          // log2(n) exchanges of S
      const double steps = std::ceil(std::log2(n));
      return steps * a + steps * S / beta;
    }
    return 2 * (n - 1) * a + 2 * frac * S / beta;                    // ring
  }
  if (op == "allgather" || op == "reducescatter" || op == "alltoall")
    return (n - 1) * a + frac * S / beta;
  if (op == "broadcast" || op == "reduce") return std::ceil(std::log2(n)) * a + S / beta;
  if (op == "gather" || op == "scatter") return (n - 1) * a + frac * S / beta;
  if (op == "barrier") return 2 * std::ceil(std::log2(n)) * a;
  return a + S / beta;  // send / recv
}

}  // namespace neuron_ccl
