// The runtime configuration read from the environment at nsimInit.
#ifndef NEURON_SIM_RUNTIME_CONFIG_H
#define NEURON_SIM_RUNTIME_CONFIG_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "profiles.h"

namespace nsim {

struct Config {
  const HardwareProfile* profile = nullptr;
  int num_chips = 1;
  int lnc = 0;
  std::vector<int> visible_cores;  // global logical core ids, ascending
  uint64_t hbm_capacity_override = 0;
  bool timeline_enabled = true;
  uint64_t timeline_capacity = 1u << 20;
  // Faults armed from the environment at nsimInit (NEURON_SIM_FAULT_*).
  uint64_t fault_alloc = 0, fault_alloc_run = 1;
  std::vector<std::pair<std::string, int>> fault_kernels;
  int fault_lost_device = -1;
  uint64_t fault_lost_after = 0;
};

// Parses every registered variable. On failure returns false with a message naming the
// variable, its value and the accepted values.
bool load_config(Config* out, std::string* error);

}  // namespace nsim

#endif
