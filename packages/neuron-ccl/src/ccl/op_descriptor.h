// The descriptor of one collective call: what every rank publishes (shared memory) or sends
// with every frame (TCP) so that ranks that called different things fail with one message.
#pragma once

#include <cstdint>
#include <string>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {

enum OpCode : int32_t {
  kOpAllReduce = 1, kOpBroadcast, kOpReduce, kOpAllGather, kOpReduceScatter, kOpAllToAll,
  kOpGather, kOpScatter, kOpBarrier
};
const char* op_name(int32_t op);

struct OpDesc {
  uint64_t seq;
  int32_t op;
  int32_t dtype;
  uint64_t count;  // elements, where every rank must agree (0 where sizes may differ)
  int32_t root;
  int32_t redop;
};

inline bool same_call(const OpDesc& a, const OpDesc& b) {
  return a.seq == b.seq && a.op == b.op && a.dtype == b.dtype && a.count == b.count && a.root == b.root &&
         a.redop == b.redop;
}

// "all_reduce #3 float32 count=7 op=SUM"
std::string describe(const OpDesc& x);

}  // namespace neuron_ccl
