#include "env.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {
namespace {

const EnvVar kVars[] = {
    {"NEURON_CCL_ALGO", "string", "",
     "Force an algorithm per operation, e.g. 'allreduce=twoshot,allgather=direct' "
     "(allreduce: oneshot|twoshot|ring). Empty: chosen by message size and rank count."},
    {"NEURON_CCL_ONESHOT_MAX_BYTES", "bytes", "65536",
     "Largest all-reduce that every rank reduces in full (oneshot); larger ones reduce-scatter "
     "then all-gather (twoshot)."},
    {"NEURON_CCL_TIMEOUT_MS", "int", "0",
     "Overrides the per-operation timeout of every communicator (0: use the creator's, e.g. "
     "init_process_group(timeout=...))."},
    {"NEURON_CCL_FLIGHT_RECORDER_SIZE", "int", "64", "Operations kept per communicator for error dumps."},
    {"NEURON_CCL_FLIGHT_RECORDER_DIR", "string", "",
     "If set, a failing rank also writes its flight record to <dir>/neuron_ccl_rank<r>.txt."},
    {"NEURON_CCL_SPIN", "int", "100",
     "Busy-poll iterations before a waiting rank yields its core (lower on oversubscribed hosts)."},
};

}  // namespace

size_t env_var_count() { return sizeof(kVars) / sizeof(kVars[0]); }
const EnvVar& env_var(size_t i) { return kVars[i]; }

std::string env_string(const char* name) {
  for (const auto& v : kVars) {
    if (std::strcmp(v.name, name) == 0) {
      const char* s = std::getenv(name);
      return s ? std::string(s) : std::string(v.default_value);
    }
  }
  throw std::logic_error(std::string("neuron_ccl: unregistered environment variable ") + name);
}

int64_t env_int(const char* name) {
  const std::string s = env_string(name);
  if (s.empty()) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0') {
    throw Error(Error::kInvalidArgument,
                std::string("neuron_ccl: environment variable ") + name + "='" + s + "' is not an integer");
  }
  return v;
}

}  // namespace neuron_ccl
