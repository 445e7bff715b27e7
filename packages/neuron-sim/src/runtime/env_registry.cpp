#include "env_registry.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nsim {
namespace {

const nsimEnvVar kEnvVars[] = {
    {"NEURON_SIM_PROFILE", NSIM_ENV_STRING, "trn2",
     "Hardware profile of every simulated chip: trn1, trn2 or trn3."},
    {"NEURON_SIM_NUM_CHIPS", NSIM_ENV_INT, "1",
     "Number of simulated chips (1..64); logical cores are numbered chip by chip."},
    {"NEURON_LOGICAL_NC_CONFIG", NSIM_ENV_INT, "profile default (trn1: 1, trn2/trn3: 2)",
     "Physical NeuronCores per logical core (LNC): trn1 allows 1; trn2 and trn3 allow 1 or 2."},
    {"NEURON_RT_VISIBLE_CORES", NSIM_ENV_CORE_LIST, "all",
     "Global logical core ids made visible as devices 0..n-1, e.g. '0-3' or '1,3'."},
    {"NEURON_SIM_HBM_CAPACITY", NSIM_ENV_BYTES, "profile share (chip HBM / logical cores per chip)",
     "Device memory per logical core in bytes, with optional K/M/G/T suffix (powers of 1024)."},
    {"NEURON_SIM_TIMELINE", NSIM_ENV_BOOL, "1",
     "Record every launch, copy and memset on the per-device timeline (1/0, true/false, on/off)."},
    {"NEURON_SIM_TIMELINE_CAPACITY", NSIM_ENV_INT, "1048576",
     "Timeline records kept per device (the newest are kept)."},
    {"NEURON_SIM_FAULT_ALLOC", NSIM_ENV_STRING, "(off)",
     "Fault injection: 'N[:K]' makes the N-th device allocation after nsimInit and the K-1 "
     "after it fail with NSIM_ERROR_OUT_OF_MEMORY (K defaults to 1; as nsimFaultFailNthAlloc)."},
    {"NEURON_SIM_FAULT_KERNEL", NSIM_ENV_STRING, "(off)",
     "Fault injection: launches named NAME fail with NSIM_ERROR_LAUNCH_FAILED, as "
     "'NAME[=COUNT],...' (COUNT launches, default 1; -1: every launch; as nsimFaultFailKernel)."},
    {"NEURON_SIM_FAULT_DEVICE_LOST", NSIM_ENV_STRING, "(off)",
     "Fault injection: 'DEVICE[@N]' loses that device at its N-th launch (default 1); that "
     "call and every later one on it fail with NSIM_ERROR_DEVICE_LOST (as nsimFaultSetDeviceLost)."},
};
constexpr size_t kEnvVarCount = sizeof(kEnvVars) / sizeof(kEnvVars[0]);

}  // namespace

const char* env_lookup(const char* name) {
  for (size_t i = 0; i < kEnvVarCount; ++i) {
    if (strcmp(kEnvVars[i].name, name) == 0) {
      const char* value = getenv(name);
      return (value && *value) ? value : nullptr;
    }
  }
  fprintf(stderr, "neuron_sim: internal error: environment variable %s is not in the registry\n",
          name);
  abort();
}

}  // namespace nsim

extern "C" {

NSIM_API size_t nsimEnvVarCount(void) { return nsim::kEnvVarCount; }

NSIM_API const nsimEnvVar* nsimEnvVarGet(size_t index) {
  return index < nsim::kEnvVarCount ? &nsim::kEnvVars[index] : nullptr;
}

}  // extern "C"
