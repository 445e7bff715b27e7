#include "env.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {
namespace {

const EnvVar kVars[] = {
    {"NEURON_CCL_ALGO", "string", "",
     "Force algorithms per operation, e.g. 'allreduce=ring,allgather=direct'. allreduce: "
     "oneshot|twoshot|ring|rdouble over shm, ring|rdouble|tree over tcp; allgather, reducescatter, "
     "reduce, barrier: direct over shm, ring over tcp; the others: direct. Empty: chosen by "
     "message size, rank count and transport (see README). Unknown names raise an error."},
    {"NEURON_CCL_ONESHOT_MAX_BYTES", "bytes", "65536",
     "With 3 or more ranks, largest shared-memory all-reduce that every rank reduces in full "
     "(oneshot) when recursive doubling does not apply; larger ones use the ring or twoshot. "
     "2 ranks always use twoshot."},
    {"NEURON_CCL_RDOUBLE_MAX_BYTES", "bytes", "65536",
     "Largest all-reduce run by recursive doubling when the rank count is a power of two (4 or "
     "more ranks over shm, 2 or more over tcp)."},
    {"NEURON_CCL_TREE_MAX_BYTES", "bytes", "65536",
     "Largest TCP all-reduce run by the binomial tree when the rank count (3 or more) is not a "
     "power of two; larger ones use the ring."},
    {"NEURON_CCL_RING_MAX_BYTES", "bytes", "33554432",
     "With 3 or more ranks, shared-memory all-reduces above the oneshot / rdouble limits and "
     "below this size use the ring (its slices stay in the shared cache); from this size on, "
     "twoshot (least DRAM traffic). 0: no ring by default for 3+ ranks. 2 ranks always use "
     "twoshot."},
    {"NEURON_CCL_RING_SLICE_BYTES", "bytes", "262144",
     "Pipelining unit of the ring algorithms: a neighbour may start on a slice as soon as it is "
     "done (shm), and the largest TCP frame."},
    {"NEURON_CCL_STAGING_BYTES", "bytes", "17179869184",
     "Size of each rank's staging memory (a sparse memfd; pages are only used once touched) "
     "holding the partial results of the shm ring and recursive doubling: float32 partials for "
     "16-bit floats, so an all-reduce of S bytes needs up to 2*S (ring) or 2*S*log2(n)."},
    {"NEURON_CCL_TRANSPORT", "string", "auto",
     "auto: shared memory when every rank runs on this host (same host name and boot id), TCP "
     "otherwise; shm: require one host; tcp: TCP sockets between every pair of ranks even on one "
     "host (127.0.0.1 there). Every rank must use the same value."},
    {"NEURON_CCL_TCP_ADDR", "string", "",
     "Address this rank publishes for TCP connections when ranks span hosts (default: the "
     "address the host name resolves to)."},
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
