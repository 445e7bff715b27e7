#include "reduce.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace neuron_ccl {
namespace {

inline float bf16_to_float(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                       // round to nearest even
  return uint16_t(u >> 16);
}
inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) { man <<= 1; --exp; }
      u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (u < 0x38800000u) {                         // subnormal or zero in half
    float a;
    std::memcpy(&a, &u, 4);
    // Scale so the half subnormal unit becomes 1, round to nearest even in float.
    const float scaled = a * 16777216.0f;  // 2^24
    return sign | uint16_t(std::nearbyint(scaled));
  }
  const uint32_t mant_odd = (u >> 13) & 1u;
  u += 0xfffu + mant_odd;
  return sign | uint16_t(((u >> 23) - 127 + 15) << 10 | ((u >> 13) & 0x3ffu));
}

// Storage type T, accumulation type A, and conversions between them.
template <typename T> struct Plain {
  using A = T;
  static A load(T v) { return v; }
  static T store(A v) { return v; }
};
struct BF16 {
  using A = float;
  static A load(uint16_t v) { return bf16_to_float(v); }
  static uint16_t store(A v) { return float_to_bf16(v); }
};
struct FP16 {
  using A = float;
  static A load(uint16_t v) { return fp16_to_float(v); }
  static uint16_t store(A v) { return float_to_fp16(v); }
};

template <typename A> inline A nan_max(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a > b ? a : b;
}
template <typename A> inline A nan_min(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? a : b;
}

template <typename T, typename C, typename F>
void combine(T* out, const void* const* in, int n, size_t count, F f, double scale, bool scaled) {
  using A = typename C::A;
  const T* in0 = static_cast<const T*>(in[0]);
  if (n == 2 && !scaled) {  // the common case: one pass, vectorisable
    const T* in1 = static_cast<const T*>(in[1]);
    for (size_t i = 0; i < count; ++i) out[i] = C::store(f(C::load(in0[i]), C::load(in1[i])));
    return;
  }
  constexpr size_t kBlock = 1024;
  A acc[kBlock];
  for (size_t b = 0; b < count; b += kBlock) {
    const size_t m = std::min(kBlock, count - b);
    for (size_t i = 0; i < m; ++i) acc[i] = C::load(in0[b + i]);
    for (int k = 1; k < n; ++k) {
      const T* p = static_cast<const T*>(in[k]) + b;
      for (size_t i = 0; i < m; ++i) acc[i] = f(acc[i], C::load(p[i]));
    }
    if (scaled) {
      for (size_t i = 0; i < m; ++i) acc[i] = static_cast<A>(acc[i] * scale);
    }
    for (size_t i = 0; i < m; ++i) out[b + i] = C::store(acc[i]);
  }
}

template <typename T, typename C>
void reduce_float(void* out, const void* const* in, int n, size_t count, const Reduction& red,
                  int world) {
  using A = typename C::A;
  T* o = static_cast<T*>(out);
  switch (red.op) {
    case ReduceOp::kSum:
      return combine<T, C>(o, in, n, count, [](A a, A b) { return A(a + b); }, 1.0, false);
    case ReduceOp::kAvg:
      return combine<T, C>(o, in, n, count, [](A a, A b) { return A(a + b); }, 1.0 / world, true);
    case ReduceOp::kPremulSum:
      return combine<T, C>(o, in, n, count, [](A a, A b) { return A(a + b); }, red.premul_factor,
                           true);
    case ReduceOp::kProduct:
      return combine<T, C>(o, in, n, count, [](A a, A b) { return A(a * b); }, 1.0, false);
    case ReduceOp::kMin:
      return combine<T, C>(o, in, n, count, [](A a, A b) { return nan_min(a, b); }, 1.0, false);
    case ReduceOp::kMax:
      return combine<T, C>(o, in, n, count, [](A a, A b) { return nan_max(a, b); }, 1.0, false);
    default:
      break;
  }
}

template <typename T>
void reduce_int(void* out, const void* const* in, int n, size_t count, const Reduction& red,
                int world) {
  using C = Plain<T>;
  using U = std::make_unsigned_t<T>;  // wrap-around arithmetic without undefined behaviour
  T* o = static_cast<T*>(out);
  auto add = [](T a, T b) { return T(U(a) + U(b)); };
  switch (red.op) {
    case ReduceOp::kSum:
      return combine<T, C>(o, in, n, count, add, 1.0, false);
    case ReduceOp::kAvg: {
      combine<T, C>(o, in, n, count, add, 1.0, false);
      for (size_t i = 0; i < count; ++i) o[i] = T(o[i] / T(world));
      return;
    }
    case ReduceOp::kProduct:
      return combine<T, C>(o, in, n, count, [](T a, T b) { return T(U(a) * U(b)); }, 1.0, false);
    case ReduceOp::kMin:
      return combine<T, C>(o, in, n, count, [](T a, T b) { return a < b ? a : b; }, 1.0, false);
    case ReduceOp::kMax:
      return combine<T, C>(o, in, n, count, [](T a, T b) { return a > b ? a : b; }, 1.0, false);
    case ReduceOp::kBand:
      return combine<T, C>(o, in, n, count, [](T a, T b) { return T(a & b); }, 1.0, false);
    case ReduceOp::kBor:
      return combine<T, C>(o, in, n, count, [](T a, T b) { return T(a | b); }, 1.0, false);
    case ReduceOp::kBxor:
      return combine<T, C>(o, in, n, count, [](T a, T b) { return T(a ^ b); }, 1.0, false);
    default:
      break;
  }
}

void reduce_bool(void* out, const void* const* in, int n, size_t count, const Reduction& red) {
  using C = Plain<uint8_t>;
  uint8_t* o = static_cast<uint8_t*>(out);
  switch (red.op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      return combine<uint8_t, C>(o, in, n, count, [](uint8_t a, uint8_t b) { return uint8_t(a | b); },
                                 1.0, false);
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      return combine<uint8_t, C>(o, in, n, count, [](uint8_t a, uint8_t b) { return uint8_t(a & b); },
                                 1.0, false);
    case ReduceOp::kBxor:
      return combine<uint8_t, C>(o, in, n, count, [](uint8_t a, uint8_t b) { return uint8_t(a ^ b); },
                                 1.0, false);
    default:
      break;
  }
}

bool is_float(DataType dt) {
  return dt == DataType::kFloat32 || dt == DataType::kFloat64 || dt == DataType::kFloat16 ||
         dt == DataType::kBFloat16;
}

// reduce_pair for one storage type: A/B select whether each operand is already in the
// accumulation type; the result is scaled and narrowed only when `finish`.
template <typename T, typename C, bool AA, bool BA, typename F>
void pair_loop(void* out, const void* a, const void* b, size_t n, F f, bool finish, bool scaled, double scale,
               int int_div) {
  using Acc = typename C::A;
  auto ld_a = [a](size_t i) -> Acc {
    if constexpr (AA) return static_cast<const Acc*>(a)[i];
    else return C::load(static_cast<const T*>(a)[i]);
  };
  auto ld_b = [b](size_t i) -> Acc {
    if constexpr (BA) return static_cast<const Acc*>(b)[i];
    else return C::load(static_cast<const T*>(b)[i]);
  };
  if (!finish) {
    Acc* o = static_cast<Acc*>(out);
    for (size_t i = 0; i < n; ++i) o[i] = f(ld_a(i), ld_b(i));
    return;
  }
  T* o = static_cast<T*>(out);
  if (scaled) {
    for (size_t i = 0; i < n; ++i) o[i] = C::store(static_cast<Acc>(f(ld_a(i), ld_b(i)) * scale));
  } else if (int_div > 1) {
    for (size_t i = 0; i < n; ++i) o[i] = C::store(static_cast<Acc>(f(ld_a(i), ld_b(i)) / Acc(int_div)));
  } else {
    for (size_t i = 0; i < n; ++i) o[i] = C::store(f(ld_a(i), ld_b(i)));
  }
}

template <typename T, typename C, typename F>
void pair_dispatch(void* out, const void* a, bool a_acc, const void* b, bool b_acc, size_t n, F f, bool finish,
                   bool scaled, double scale, int int_div) {
  // For dtypes that accumulate in themselves the flags change nothing: one instantiation.
  if constexpr (std::is_same_v<typename C::A, T>) {
    return pair_loop<T, C, false, false>(out, a, b, n, f, finish, scaled, scale, int_div);
  } else {
    if (a_acc && b_acc) return pair_loop<T, C, true, true>(out, a, b, n, f, finish, scaled, scale, int_div);
    if (a_acc) return pair_loop<T, C, true, false>(out, a, b, n, f, finish, scaled, scale, int_div);
    if (b_acc) return pair_loop<T, C, false, true>(out, a, b, n, f, finish, scaled, scale, int_div);
    return pair_loop<T, C, false, false>(out, a, b, n, f, finish, scaled, scale, int_div);
  }
}

template <typename T, typename C>
void pair_float(void* out, const void* a, bool aa, const void* b, bool ba, size_t n, const Reduction& red, int world,
                bool finish) {
  using A = typename C::A;
  const auto add = [](A x, A y) { return A(x + y); };
  switch (red.op) {
    case ReduceOp::kSum: return pair_dispatch<T, C>(out, a, aa, b, ba, n, add, finish, false, 1.0, 1);
    case ReduceOp::kAvg: return pair_dispatch<T, C>(out, a, aa, b, ba, n, add, finish, true, 1.0 / world, 1);
    case ReduceOp::kPremulSum:
      return pair_dispatch<T, C>(out, a, aa, b, ba, n, add, finish, true, red.premul_factor, 1);
    case ReduceOp::kProduct:
      return pair_dispatch<T, C>(out, a, aa, b, ba, n, [](A x, A y) { return A(x * y); }, finish, false, 1.0, 1);
    case ReduceOp::kMin:
      return pair_dispatch<T, C>(out, a, aa, b, ba, n, [](A x, A y) { return nan_min(x, y); }, finish, false, 1.0, 1);
    case ReduceOp::kMax:
      return pair_dispatch<T, C>(out, a, aa, b, ba, n, [](A x, A y) { return nan_max(x, y); }, finish, false, 1.0, 1);
    default: break;
  }
}

template <typename T>
void pair_int(void* out, const void* a, const void* b, size_t n, const Reduction& red, int world, bool finish) {
  using C = Plain<T>;
  using U = std::make_unsigned_t<T>;
  const auto add = [](T x, T y) { return T(U(x) + U(y)); };
  switch (red.op) {
    case ReduceOp::kSum: return pair_dispatch<T, C>(out, a, false, b, false, n, add, finish, false, 1.0, 1);
    case ReduceOp::kAvg: return pair_dispatch<T, C>(out, a, false, b, false, n, add, finish, false, 1.0, world);
    case ReduceOp::kProduct:
      return pair_dispatch<T, C>(out, a, false, b, false, n, [](T x, T y) { return T(U(x) * U(y)); }, finish, false,
                                 1.0, 1);
    case ReduceOp::kMin:
      return pair_dispatch<T, C>(out, a, false, b, false, n, [](T x, T y) { return x < y ? x : y; }, finish, false,
                                 1.0, 1);
    case ReduceOp::kMax:
      return pair_dispatch<T, C>(out, a, false, b, false, n, [](T x, T y) { return x > y ? x : y; }, finish, false,
                                 1.0, 1);
    case ReduceOp::kBand:
      return pair_dispatch<T, C>(out, a, false, b, false, n, [](T x, T y) { return T(x & y); }, finish, false, 1.0, 1);
    case ReduceOp::kBor:
      return pair_dispatch<T, C>(out, a, false, b, false, n, [](T x, T y) { return T(x | y); }, finish, false, 1.0, 1);
    case ReduceOp::kBxor:
      return pair_dispatch<T, C>(out, a, false, b, false, n, [](T x, T y) { return T(x ^ y); }, finish, false, 1.0, 1);
    default: break;
  }
}

void pair_bool(void* out, const void* a, const void* b, size_t n, const Reduction& red) {
  using C = Plain<uint8_t>;
  switch (red.op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      return pair_dispatch<uint8_t, C>(out, a, false, b, false, n, [](uint8_t x, uint8_t y) { return uint8_t(x | y); },
                                       true, false, 1.0, 1);
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      return pair_dispatch<uint8_t, C>(out, a, false, b, false, n, [](uint8_t x, uint8_t y) { return uint8_t(x & y); },
                                       true, false, 1.0, 1);
    case ReduceOp::kBxor:
      return pair_dispatch<uint8_t, C>(out, a, false, b, false, n, [](uint8_t x, uint8_t y) { return uint8_t(x ^ y); },
                                       true, false, 1.0, 1);
    default: break;
  }
}

}  // namespace

size_t accum_size(DataType dt) {
  return (dt == DataType::kBFloat16 || dt == DataType::kFloat16) ? 4 : dtype_size(dt);
}

void reduce_pair(void* out, const void* a, bool a_acc, const void* b, bool b_acc, size_t count, DataType dt,
                 const Reduction& red, int world, bool finish) {
  switch (dt) {
    case DataType::kFloat32: return pair_float<float, Plain<float>>(out, a, a_acc, b, b_acc, count, red, world, finish);
    case DataType::kFloat64:
      return pair_float<double, Plain<double>>(out, a, a_acc, b, b_acc, count, red, world, finish);
    case DataType::kBFloat16: return pair_float<uint16_t, BF16>(out, a, a_acc, b, b_acc, count, red, world, finish);
    case DataType::kFloat16: return pair_float<uint16_t, FP16>(out, a, a_acc, b, b_acc, count, red, world, finish);
    case DataType::kInt8: return pair_int<int8_t>(out, a, b, count, red, world, finish);
    case DataType::kUInt8: return pair_int<uint8_t>(out, a, b, count, red, world, finish);
    case DataType::kInt16: return pair_int<int16_t>(out, a, b, count, red, world, finish);
    case DataType::kInt32: return pair_int<int32_t>(out, a, b, count, red, world, finish);
    case DataType::kInt64: return pair_int<int64_t>(out, a, b, count, red, world, finish);
    case DataType::kBool: return pair_bool(out, a, b, count, red);
    default: break;
  }
  throw Error(Error::kInvalidArgument, "neuron_ccl: unknown dtype in reduction");
}

void check_reduction(DataType dt, const Reduction& red, const char* op) {
  const bool bitwise = red.op == ReduceOp::kBand || red.op == ReduceOp::kBor || red.op == ReduceOp::kBxor;
  if (bitwise && is_float(dt)) {
    throw Error(Error::kInvalidArgument,
                std::string("neuron_ccl ") + op + ": reduce op " + reduce_op_name(red.op) +
                    " is defined for integer and bool tensors only, got " + dtype_name(dt));
  }
  if ((red.op == ReduceOp::kPremulSum || red.op == ReduceOp::kAvg) && dt == DataType::kBool) {
    throw Error(Error::kInvalidArgument, std::string("neuron_ccl ") + op + ": reduce op " +
                                             reduce_op_name(red.op) + " is not defined for bool");
  }
  if (red.op == ReduceOp::kPremulSum && !is_float(dt)) {
    throw Error(Error::kInvalidArgument,
                std::string("neuron_ccl ") + op +
                    ": PREMUL_SUM needs a floating-point dtype (the factor is real), got " +
                    dtype_name(dt) + "; scale integer tensors before a SUM instead");
  }
  if (static_cast<int>(red.op) < 0 || red.op >= ReduceOp::kCount_) {
    throw Error(Error::kInvalidArgument, std::string("neuron_ccl ") + op + ": unknown reduce op");
  }
}

void reduce_buffers(void* out, const void* const* in, int n, size_t count, DataType dt,
                    const Reduction& red, int world) {
  if (n == 1 && red.op != ReduceOp::kAvg && red.op != ReduceOp::kPremulSum) {
    if (out != in[0]) std::memmove(out, in[0], count * dtype_size(dt));
    return;
  }
  switch (dt) {
    case DataType::kFloat32: return reduce_float<float, Plain<float>>(out, in, n, count, red, world);
    case DataType::kFloat64: return reduce_float<double, Plain<double>>(out, in, n, count, red, world);
    case DataType::kBFloat16: return reduce_float<uint16_t, BF16>(out, in, n, count, red, world);
    case DataType::kFloat16: return reduce_float<uint16_t, FP16>(out, in, n, count, red, world);
    case DataType::kInt8: return reduce_int<int8_t>(out, in, n, count, red, world);
    case DataType::kUInt8: return reduce_int<uint8_t>(out, in, n, count, red, world);
    case DataType::kInt16: return reduce_int<int16_t>(out, in, n, count, red, world);
    case DataType::kInt32: return reduce_int<int32_t>(out, in, n, count, red, world);
    case DataType::kInt64: return reduce_int<int64_t>(out, in, n, count, red, world);
    case DataType::kBool: return reduce_bool(out, in, n, count, red);
    default: break;
  }
  throw Error(Error::kInvalidArgument, "neuron_ccl: unknown dtype in reduction");
}

void stream_bytes(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t vec = bytes / 64;
  for (size_t i = 0; i < vec; ++i) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + 0);
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + 1);
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + 2);
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + 3);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d) + 0, a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d) + 1, b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d) + 2, c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d) + 3, e);
    d += 64;
    s += 64;
  }
  std::memcpy(d, s, bytes - vec * 64);
}

void store_fence() { _mm_sfence(); }

namespace {
// One element of the fused kernel, for the unaligned head and the tail.
inline void sum2_scalar(float* o0, float* o1, const float* a, const float* b, size_t i) {
  const float v = a[i] + b[i];
  o0[i] = v;
  o1[i] = v;
}

// The vector body: 16 floats (one cache line per output) per iteration. An output that is
// streamed must be 32-byte aligned at o + 0 here; the store kind is a loop-invariant branch.
__attribute__((target("avx2"))) void sum2_body_avx2(float* o0, bool nt0, float* o1, bool nt1, const float* a,
                                                    const float* b, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
    if (nt0) {
      _mm256_stream_ps(o0 + i, v0);
      _mm256_stream_ps(o0 + i + 8, v1);
    } else {
      _mm256_storeu_ps(o0 + i, v0);
      _mm256_storeu_ps(o0 + i + 8, v1);
    }
    if (nt1) {
      _mm256_stream_ps(o1 + i, v0);
      _mm256_stream_ps(o1 + i + 8, v1);
    } else {
      _mm256_storeu_ps(o1 + i, v0);
      _mm256_storeu_ps(o1 + i + 8, v1);
    }
  }
}

void sum2_body_sse(float* o0, bool nt0, float* o1, bool nt1, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i + 16 <= n; i += 16) {
    for (size_t k = 0; k < 16; k += 4) {
      const __m128 v = _mm_add_ps(_mm_loadu_ps(a + i + k), _mm_loadu_ps(b + i + k));
      if (nt0) _mm_stream_ps(o0 + i + k, v); else _mm_storeu_ps(o0 + i + k, v);
      if (nt1) _mm_stream_ps(o1 + i + k, v); else _mm_storeu_ps(o1 + i + k, v);
    }
  }
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
}  // namespace

bool sum2_f32(float* out0, bool nt0, float* out1, bool nt1, const float* a, const float* b, size_t n) {
  constexpr uintptr_t kAlign = 32;
  auto mis = [](const float* p) { return reinterpret_cast<uintptr_t>(p) % kAlign; };
  // Streamed outputs must reach vector alignment at the same element; so must the other
  // output when both stream. A float pointer that is not 4-byte aligned never does.
  if ((nt0 && mis(out0) % 4) || (nt1 && mis(out1) % 4)) return false;
  if (nt0 && nt1 && mis(out0) != mis(out1)) return false;
  const float* lead = nt0 ? out0 : out1;
  size_t i = 0;
  if (nt0 || nt1)
    for (; i < n && mis(lead + i) != 0; ++i) sum2_scalar(out0, out1, a, b, i);
  const size_t body = (n - i) / 16 * 16;
  if (have_avx2()) {
    sum2_body_avx2(out0 + i, nt0, out1 + i, nt1, a + i, b + i, body);
  } else {
    sum2_body_sse(out0 + i, nt0, out1 + i, nt1, a + i, b + i, body);
  }
  for (i += body; i < n; ++i) sum2_scalar(out0, out1, a, b, i);
  return true;
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  // Above ~1 MiB the destination will not be read again soon by this rank: non-temporal
  // stores skip the read-for-ownership of every destination line (a third of the traffic).
  constexpr size_t kStreamThreshold = size_t(1) << 20;
  if (bytes < kStreamThreshold) {
    std::memcpy(dst, src, bytes);
    return;
  }
  stream_bytes(dst, src, bytes);
  _mm_sfence();
}

}  // namespace neuron_ccl
