#include "op_descriptor.h"

namespace neuron_ccl {

const char* op_name(int32_t op) {
  static const char* names[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather",
                                "reduce_scatter", "all_to_all", "gather", "scatter", "barrier"};
  return op >= 0 && op <= kOpBarrier ? names[op] : "?";
}

std::string describe(const OpDesc& x) {
  std::string s = std::string(op_name(x.op)) + " #" + std::to_string(x.seq) + " " +
                  dtype_name(static_cast<DataType>(x.dtype));
  if (x.count) s += " count=" + std::to_string(x.count);
  if (x.op == kOpBroadcast || x.op == kOpReduce || x.op == kOpGather || x.op == kOpScatter)
    s += " root=" + std::to_string(x.root);
  if (x.op == kOpAllReduce || x.op == kOpReduce || x.op == kOpReduceScatter)
    s += std::string(" op=") + reduce_op_name(static_cast<ReduceOp>(x.redop));
  return s;
}

}  // namespace neuron_ccl
