// Algorithm selection: which algorithm each operation runs, by message size, rank count and
// transport, and the NEURON_CCL_ALGO override (the thresholds are explained in the README).
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "env.h"
#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {

namespace {
// The algorithms each operation has, per transport (what NEURON_CCL_ALGO may name); the first
// is the default where the size does not decide. Over shared memory, ring and recursive
// doubling exist for all-reduce only: for the other operations every rank copies what it needs
// straight from the owners' buffers - the volume a ring would copy, without its n-1 dependent
// steps.
struct AlgoTable {
  const char* op;
  std::vector<std::string> shm, tcp;
};
const std::vector<AlgoTable>& algo_table() {
  static const std::vector<AlgoTable> t = {
      {"allreduce", {"oneshot", "twoshot", "ring", "rdouble"}, {"ring", "rdouble", "tree"}},
      {"allgather", {"direct"}, {"ring"}},
      {"reducescatter", {"direct"}, {"ring"}},
      {"reduce", {"direct"}, {"ring"}},
      {"broadcast", {"direct"}, {"direct"}},
      {"alltoall", {"direct"}, {"direct"}},
      {"gather", {"direct"}, {"direct"}},
      {"scatter", {"direct"}, {"direct"}},
      {"barrier", {"direct"}, {"ring"}},
  };
  return t;
}
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}
}  // namespace

std::string select_algorithm(const std::string& op, size_t bytes, int ranks) {
  return select_algorithm(op, bytes, ranks, "shm");
}

std::string select_algorithm(const std::string& op, size_t bytes, int ranks, const std::string& transport) {
  if (transport != "shm" && transport != "tcp")
    throw Error(Error::kInvalidArgument, "neuron_ccl: unknown transport '" + transport + "' (shm, tcp)");
  const bool tcp = transport == "tcp";
  const AlgoTable* entry = nullptr;
  std::vector<std::string> ops;
  for (const auto& t : algo_table()) {
    ops.push_back(t.op);
    if (op == t.op) entry = &t;
  }
  if (!entry) throw Error(Error::kInvalidArgument, "neuron_ccl: unknown operation '" + op + "' (" + join(ops) + ")");
  const auto& allowed = tcp ? entry->tcp : entry->shm;
  // NEURON_CCL_ALGO: comma-separated op=algorithm items; every item is validated, so a typo
  // fails loudly instead of silently leaving the default in place.
  const std::string forced = env_string("NEURON_CCL_ALGO");
  std::stringstream ss(forced);
  std::string item, chosen;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const AlgoTable* named = nullptr;
    for (const auto& t : algo_table())
      if (name == t.op) named = &t;
    if (eq == std::string::npos || !named) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: NEURON_CCL_ALGO='" + forced + "': item '" + item +
                                               "' is not <operation>=<algorithm> with operation one of " + join(ops));
    }
    const std::string algo = item.substr(eq + 1);
    const auto& ok = tcp ? named->tcp : named->shm;
    if (std::find(ok.begin(), ok.end(), algo) == ok.end()) {
      throw Error(Error::kInvalidArgument, "neuron_ccl: NEURON_CCL_ALGO: " + name + " algorithm '" + algo +
                                               "' unknown for the " + transport + " transport (" + join(ok) + ")");
    }
    if (name == op) chosen = algo;
  }
  if (!chosen.empty()) return chosen;
  if (op != "allreduce") return allowed.front();
  const bool pow2 = ranks > 0 && (ranks & (ranks - 1)) == 0;
  const size_t rdouble_max = size_t(env_int("NEURON_CCL_RDOUBLE_MAX_BYTES"));
  if (tcp) {
    // Over sockets every step costs a round trip: for small messages log2(n) steps (recursive
    // doubling, power-of-two counts) or 2*ceil(log2 n) (binomial tree, other counts) beat the
    // ring's 2(n-1) (4 KiB over loopback: 3 ranks 47 vs 77 us, 6 ranks 371 vs 632 us); the ring
    // moves the least data for large ones (1 MiB, 3 and 5 ranks: ring 20-50% faster).
    if (pow2 && ranks > 1 && bytes <= rdouble_max) return "rdouble";
    if (!pow2 && ranks > 2 && bytes <= size_t(env_int("NEURON_CCL_TREE_MAX_BYTES"))) return "tree";
    return "ring";
  }
  if (ranks <= 1) return "oneshot";
  // Two ranks: the direct single-copy algorithm (twoshot) at every size. Each rank reduces its
  // half from both inputs straight into both outputs: it reads S and writes S, the minimum, with
  // the same two syncs as oneshot (2 ranks, reference VM: 4 KiB 3 vs 4 us oneshot; 1 MiB 24 vs
  // 117 us ring; 256 MiB 86 vs 140 ms ring, README).
  if (ranks == 2) return "twoshot";
  // Shared memory, small: with 4+ ranks (power of two) recursive doubling waits only on one
  // partner per step instead of on every rank.
  if (pow2 && ranks >= 4 && bytes <= rdouble_max) return "rdouble";
  // One-shot (every rank reduces everything) costs (n-1)*S reads per rank but only two
  // syncs; the others move 2(n-1)/n*S. Small messages are latency-bound.
  if (bytes <= size_t(env_int("NEURON_CCL_ONESHOT_MAX_BYTES"))) return "oneshot";
  // With 3+ ranks, up to the size of a last-level cache, the ring won (4 ranks on 2 cores):
  // each rank writes only its own memory, and a slice a neighbour just produced is still in
  // the shared cache when the next rank reads it. Beyond the cache the chain of neighbour
  // waits cost more than twoshot's extra traffic (64-128 MiB: twoshot 20-30% faster).
  if (bytes < size_t(env_int("NEURON_CCL_RING_MAX_BYTES"))) return "ring";
  return "twoshot";
}

}  // namespace neuron_ccl
