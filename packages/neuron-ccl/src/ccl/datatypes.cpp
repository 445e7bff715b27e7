// Names and sizes of the element types and reduction operators of the public API (the order
// of the enums in neuron_ccl.h).
#include <cctype>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {
namespace {
const char* kDtypeNames[] = {"float32", "float64", "float16", "bfloat16", "int8",
                             "uint8",   "int16",   "int32",   "int64",    "bool"};
const size_t kDtypeSizes[] = {4, 8, 2, 2, 1, 1, 2, 4, 8, 1};
const char* kReduceNames[] = {"SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM", "BAND", "BOR", "BXOR"};
}  // namespace

size_t dtype_size(DataType t) { return kDtypeSizes[static_cast<int>(t)]; }
const char* dtype_name(DataType t) { return kDtypeNames[static_cast<int>(t)]; }
DataType dtype_from_name(const std::string& name) {
  for (int i = 0; i < static_cast<int>(DataType::kCount_); ++i)
    if (name == kDtypeNames[i]) return static_cast<DataType>(i);
  throw Error(Error::kInvalidArgument, "neuron_ccl: unknown dtype '" + name + "'");
}
const char* reduce_op_name(ReduceOp op) { return kReduceNames[static_cast<int>(op)]; }
ReduceOp reduce_op_from_name(const std::string& name) {
  std::string up = name;
  for (auto& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (int i = 0; i < static_cast<int>(ReduceOp::kCount_); ++i)
    if (up == kReduceNames[i]) return static_cast<ReduceOp>(i);
  throw Error(Error::kInvalidArgument, "neuron_ccl: unknown reduce op '" + name + "'");
}

}  // namespace neuron_ccl
