// The runtime configuration read from the environment at nsimInit.
#ifndef NEURON_SIM_RUNTIME_CONFIG_H
#define NEURON_SIM_RUNTIME_CONFIG_H

#include <cstdint>
#include <string>
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
};

// Parses every registered variable. On failure returns false with a message naming the
// variable, its value and the accepted values.
bool load_config(Config* out, std::string* error);

}  // namespace nsim

#endif
