// Built-in hardware profiles (trn1, trn2, trn3) and the per-logical-core properties derived
// from them.
#ifndef NEURON_SIM_RUNTIME_PROFILES_H
#define NEURON_SIM_RUNTIME_PROFILES_H

#include <cstdint>

#include "neuron_sim/neuron_sim.h"

namespace nsim {

struct HardwareProfile {
  const char* name;            // "trn2"
  const char* chip_name;       // "Trainium2"
  const char* core_name;       // "NC-v3"
  int core_version;            // compute capability major
  int physical_cores_per_chip;
  int default_lnc;
  int max_lnc;                 // allowed LNC values are 1..max_lnc
  uint64_t hbm_bytes_per_chip;
  double hbm_bandwidth_per_chip;       // bytes/s
  double tensor_flops_bf16_per_core;   // FLOP/s per physical core
  double tensor_flops_fp32_per_core;
  double tensor_flops_fp8_per_core;
  double vector_flops_fp32_per_core;
  double tensor_clock_hz, vector_clock_hz, scalar_clock_hz, gpsimd_clock_hz;
  int sbuf_partitions;
  uint64_t sbuf_bytes_per_partition;
  uint64_t psum_bytes_per_partition;
  int psum_banks;
  int dma_engines_per_core;
  double dma_engine_bandwidth;         // bytes/s per engine
  double dma_fixed_overhead_ns;
  double launch_overhead_ns;
  double chip_link_bandwidth;          // bytes/s per chip
  double host_link_bandwidth;          // bytes/s per direction (assumed; see profiles.cpp)
};

const HardwareProfile* find_profile(const char* name);

// Properties of one logical core. hbm_capacity_override = 0 keeps the profile's share.
void fill_properties(const HardwareProfile& p, int lnc, uint64_t hbm_capacity_override,
                     nsimDeviceProperties* props);

}  // namespace nsim

#endif
