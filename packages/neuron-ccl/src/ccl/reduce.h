// Element-wise reductions over n input buffers (host aliases), used by every reducing
// collective. Inputs are combined in rank order so every rank that reduces the same block
// produces identical bits. bfloat16 and float16 are accumulated in float32 and rounded once.
#pragma once

#include <cstddef>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {

// Throws Error(kInvalidArgument) when `red` is not defined for `dt` (bitwise ops on floats,
// PREMUL_SUM on integers).
void check_reduction(DataType dt, const Reduction& red, const char* op);

// out[i] = red(in[0][i], ..., in[n-1][i]) for i < count, then AVG divides by `world` and
// PREMUL_SUM multiplies by the factor. `out` may alias one of the inputs element for element.
void reduce_buffers(void* out, const void* const* in, int n, size_t count, DataType dt,
                    const Reduction& red, int world);

// Element size of the accumulation type: float32 for bfloat16 and float16 (so partial results
// that travel between ranks keep float32 precision), the dtype itself otherwise.
size_t accum_size(DataType dt);

// One combining step of the chained algorithms (ring, recursive doubling): out = a (op) b,
// element-wise, evaluated in that order. Each operand is either in the dtype (`*_acc` false) or
// in the accumulation type (true). With `finish` the result gets AVG's 1/world or PREMUL_SUM's
// factor and is stored in the dtype; without, it stays in the accumulation type, unscaled.
// `out` may alias `a` or `b` element for element.
void reduce_pair(void* out, const void* a, bool a_acc, const void* b, bool b_acc, size_t count,
                 DataType dt, const Reduction& red, int world, bool finish);

// memcpy that streams large copies past the cache (the destination is not read back soon).
void copy_bytes(void* dst, const void* src, size_t bytes);
// Always streams (non-temporal stores where aligned); callers batch these and call
// store_fence() before publishing the data to other ranks.
void stream_bytes(void* dst, const void* src, size_t bytes);
void store_fence();

// out0[i] = out1[i] = a[i] + b[i]: the two-rank float32 SUM case of the direct all-reduce,
// fused so each input byte is read once and no scratch is touched. `nt0`/`nt1`: store that
// output with non-temporal stores (for an output that is not also an input: it saves the
// read-for-ownership). An output that aliases an input element for element must use plain
// stores: its lines were just loaded, and a streaming store would evict them first (in place,
// 256 MiB on the reference host: ~2x slower). Returns false (nothing written) when the
// streamed outputs cannot be aligned together; call store_fence() before publishing.
bool sum2_f32(float* out0, bool nt0, float* out1, bool nt1, const float* a, const float* b, size_t n);

}  // namespace neuron_ccl
