// ctest for neuron_ccl's C++ side, without Python: the reduction kernels of every dtype and op
// against a double-precision reference, algorithm selection and its NEURON_CCL_ALGO errors,
// environment parsing errors, and all-reduces of a 2-rank communicator in forked processes
// (shm with every algorithm, and tcp) bootstrapped through a file-based store.
//
// The parent never touches neuron_sim: every rank initialises its own runtime after fork.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "env.h"
#include "neuron_ccl/neuron_ccl.h"
#include "reduce.h"

using namespace neuron_ccl;

namespace {

int g_failures = 0;

#define CHECK(cond, ...)                                                           \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);      \
      std::fprintf(stderr, __VA_ARGS__);                                           \
      std::fprintf(stderr, "\n");                                                  \
      ++g_failures;                                                                \
    }                                                                              \
  } while (0)

// Runs `fn`, which must throw neuron_ccl::Error of `kind` with `needle` in its message.
void expect_error(const std::function<void()>& fn, Error::Kind kind, const std::string& needle, const char* what) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == kind, "%s: kind %d, expected %d (%s)", what, int(e.kind()), int(kind), e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos, "%s: message '%s' lacks '%s'", what, e.what(),
          needle.c_str());
    return;
  }
  CHECK(false, "%s: no neuron_ccl::Error thrown", what);
}

// ---------------------------------------------------------------- element encodings
// The values used are exactly representable in every dtype (multiples of 0.5 up to 8), so the
// reference sees the same inputs as the kernels.
uint16_t to_bf16(double v) {
  const float f = float(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);  // exact for the values used
}
double from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double from_fp16(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1 : 1;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}
uint16_t to_fp16(double v) {  // exact for normal values with at most 11 significant bits
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  const double fr = std::frexp(std::fabs(v), &e);  // fr in [0.5, 1)
  const int mant = int(std::lround(fr * 2048)) - 1024;
  return uint16_t(sign | ((e - 1 + 15) << 10) | mant);
}

bool is_float(DataType dt) {
  return dt == DataType::kFloat32 || dt == DataType::kFloat64 || dt == DataType::kFloat16 ||
         dt == DataType::kBFloat16;
}
bool is_unsigned(DataType dt) { return dt == DataType::kUInt8 || dt == DataType::kBool; }

void store(DataType dt, void* p, size_t i, double v) {
  switch (dt) {
    case DataType::kFloat32: static_cast<float*>(p)[i] = float(v); return;
    case DataType::kFloat64: static_cast<double*>(p)[i] = v; return;
    case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = to_fp16(v); return;
    case DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = to_bf16(v); return;
    case DataType::kInt8: static_cast<int8_t*>(p)[i] = int8_t(v); return;
    case DataType::kUInt8: static_cast<uint8_t*>(p)[i] = uint8_t(v); return;
    case DataType::kInt16: static_cast<int16_t*>(p)[i] = int16_t(v); return;
    case DataType::kInt32: static_cast<int32_t*>(p)[i] = int32_t(v); return;
    case DataType::kInt64: static_cast<int64_t*>(p)[i] = int64_t(v); return;
    case DataType::kBool: static_cast<uint8_t*>(p)[i] = v != 0; return;
    default: break;
  }
  std::abort();
}
double load(DataType dt, const void* p, size_t i) {
  switch (dt) {
    case DataType::kFloat32: return static_cast<const float*>(p)[i];
    case DataType::kFloat64: return static_cast<const double*>(p)[i];
    case DataType::kFloat16: return from_fp16(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBFloat16: return from_bf16(static_cast<const uint16_t*>(p)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(p)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(p)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(p)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(p)[i];
    case DataType::kInt64: return double(static_cast<const int64_t*>(p)[i]);
    case DataType::kBool: return static_cast<const uint8_t*>(p)[i];
    default: break;
  }
  std::abort();
}

// Input k, element i: small values (products of three stay exact everywhere), negative ones
// only for signed types, halves only for floats.
double value(DataType dt, int k, size_t i) {
  if (dt == DataType::kBool) return double((i * 7 + k * 3) % 3 == 0);
  const int base = int((i * 5 + size_t(k) * 11) % 9);  // 0..8
  if (is_float(dt)) return (base - 4) * (k == 1 ? 0.5 : 1.0);
  return is_unsigned(dt) ? base % 4 : base % 7 - 3;  // products of four fit in int8 / uint8
}

// Reference of reduce_buffers in double, in rank order; `world` divides AVG.
double reference(DataType dt, ReduceOp op, const std::vector<double>& xs, int world, double factor) {
  double acc = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    const double x = xs[k];
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kAvg: case ReduceOp::kPremulSum:
        acc = dt == DataType::kBool ? double(acc != 0 || x != 0) : acc + x; break;
      case ReduceOp::kProduct: acc = dt == DataType::kBool ? double(acc != 0 && x != 0) : acc * x; break;
      case ReduceOp::kMin: acc = std::min(acc, x); break;
      case ReduceOp::kMax: acc = std::max(acc, x); break;
      case ReduceOp::kBand: acc = double(int64_t(acc) & int64_t(x)); break;
      case ReduceOp::kBor: acc = double(int64_t(acc) | int64_t(x)); break;
      case ReduceOp::kBxor: acc = double(int64_t(acc) ^ int64_t(x)); break;
      default: std::abort();
    }
  }
  if (op == ReduceOp::kAvg) acc = is_float(dt) ? acc / world : double(int64_t(acc) / world);  // C++ truncation
  if (op == ReduceOp::kPremulSum) acc *= factor;
  if (dt == DataType::kUInt8 && acc < 0) acc += 256;  // bitwise ops of unsigned values stay >= 0 anyway
  return acc;
}

double tolerance(DataType dt) {
  switch (dt) {
    case DataType::kBFloat16: return 1.0 / 128;  // one rounding to 8 significant bits
    case DataType::kFloat16: return 1.0 / 1024;
    case DataType::kFloat32: return 1e-6;
    case DataType::kFloat64: return 1e-14;
    default: return 0;
  }
}

bool close(DataType dt, double got, double want) {
  return std::fabs(got - want) <= tolerance(dt) * std::max(1.0, std::fabs(want));
}

// ---------------------------------------------------------------- reduction kernels
void test_reductions() {
  const size_t count = 37;  // not a multiple of any vector width
  const double factor = 0.25;
  int checked = 0, rejected = 0;
  for (int d = 0; d < int(DataType::kCount_); ++d) {
    const DataType dt = DataType(d);
    const size_t es = dtype_size(dt);
    for (int o = 0; o < int(ReduceOp::kCount_); ++o) {
      const ReduceOp op = ReduceOp(o);
      const Reduction red{op, factor};
      const std::string name = std::string(dtype_name(dt)) + "/" + reduce_op_name(op);
      const bool bitwise = op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
      const bool valid = !(bitwise && is_float(dt)) &&
                         !(dt == DataType::kBool && (op == ReduceOp::kAvg || op == ReduceOp::kPremulSum)) &&
                         !(op == ReduceOp::kPremulSum && !is_float(dt));
      if (!valid) {
        expect_error([&] { check_reduction(dt, red, "all_reduce"); }, Error::kInvalidArgument, "all_reduce: ",
                     name.c_str());
        ++rejected;
        continue;
      }
      check_reduction(dt, red, "all_reduce");
      for (int n = 1; n <= 4; ++n) {
        std::vector<std::vector<char>> in(n, std::vector<char>(count * es));
        std::vector<const void*> ptrs(n);
        for (int k = 0; k < n; ++k) {
          for (size_t i = 0; i < count; ++i) store(dt, in[k].data(), i, value(dt, k, i));
          ptrs[k] = in[k].data();
        }
        std::vector<char> out(count * es);
        reduce_buffers(out.data(), ptrs.data(), n, count, dt, red, n);
        for (size_t i = 0; i < count; ++i) {
          std::vector<double> xs;
          for (int k = 0; k < n; ++k) xs.push_back(load(dt, in[k].data(), i));
          const double want = reference(dt, op, xs, n, factor), got = load(dt, out.data(), i);
          CHECK(close(dt, got, want), "%s n=%d [%zu]: got %.17g, want %.17g", name.c_str(), n, i, got, want);
        }
        // The chained form (ring, recursive doubling) gives the same bits: partials in the
        // accumulation type, scaled and narrowed once at the end.
        if (n >= 2) {
          std::vector<char> acc(count * accum_size(dt)), chained(count * es);
          if (n == 2) {
            reduce_pair(chained.data(), ptrs[0], false, ptrs[1], false, count, dt, red, n, true);
          } else {
            reduce_pair(acc.data(), ptrs[0], false, ptrs[1], false, count, dt, red, n, false);
            for (int k = 2; k < n - 1; ++k)
              reduce_pair(acc.data(), acc.data(), true, ptrs[k], false, count, dt, red, n, false);
            reduce_pair(chained.data(), acc.data(), true, ptrs[n - 1], false, count, dt, red, n, true);
          }
          CHECK(std::memcmp(chained.data(), out.data(), out.size()) == 0, "%s n=%d: chained reduce_pair differs",
                name.c_str(), n);
        }
        ++checked;
      }
    }
  }
  // Valid: 4 floats x 6 ops, 5 integer types x 8, bool x 7; each with 1-4 inputs. Rejected:
  // bitwise ops on floats, PREMUL_SUM on integers, AVG and PREMUL_SUM on bool.
  CHECK(checked == 4 * (4 * 6 + 5 * 8 + 7), "ran %d dtype/op/n combinations", checked);
  CHECK(rejected == 4 * 3 + 5 + 2, "rejected %d invalid dtype/op pairs", rejected);
}

// The fused two-output float32 kernel: every store-kind combination, alignment and length.
void test_sum2_f32() {
  const size_t cap = 1200;
  std::vector<float> a(cap), b(cap);
  for (size_t i = 0; i < cap; ++i) {
    a[i] = float(i) * 0.5f - 100;
    b[i] = float(i % 13) - 6;
  }
  alignas(64) static float o0[cap + 64], o1[cap + 64];
  for (size_t n : {size_t(0), size_t(5), size_t(16), size_t(1000), size_t(1037)}) {
    for (int mask = 0; mask < 4; ++mask) {
      for (size_t s0 : {0, 1, 3}) {
        for (size_t s1 : {0, 1, 2}) {
          const bool nt0 = mask & 1, nt1 = mask & 2;
          std::fill(std::begin(o0), std::end(o0), -1.0f);
          std::fill(std::begin(o1), std::end(o1), -1.0f);
          const bool ok = sum2_f32(o0 + s0, nt0, o1 + s1, nt1, a.data(), b.data(), n);
          store_fence();
          const bool must_work = !(nt0 && nt1 && s0 != s1);
          CHECK(ok == must_work, "sum2_f32 n=%zu nt=%d%d offsets %zu,%zu returned %d", n, nt0, nt1, s0, s1, ok);
          for (size_t i = 0; i < cap + 64; ++i) {
            const bool in0 = ok && i >= s0 && i < s0 + n, in1 = ok && i >= s1 && i < s1 + n;
            const float w0 = in0 ? a[i - s0] + b[i - s0] : -1.0f, w1 = in1 ? a[i - s1] + b[i - s1] : -1.0f;
            if (o0[i] != w0 || o1[i] != w1) {
              CHECK(false, "sum2_f32 n=%zu nt=%d%d offsets %zu,%zu: element %zu is %g/%g, want %g/%g", n, nt0, nt1,
                    s0, s1, i, o0[i], o1[i], w0, w1);
              break;
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- selection and environment
void test_selection_and_env() {
  unsetenv("NEURON_CCL_ALGO");
  CHECK(select_algorithm("allreduce", 4096, 2) == "twoshot", "2 ranks small");
  CHECK(select_algorithm("allreduce", size_t(256) << 20, 2) == "twoshot", "2 ranks large");
  CHECK(select_algorithm("allreduce", 4096, 3) == "oneshot", "3 ranks small");
  CHECK(select_algorithm("allreduce", 4096, 4) == "rdouble", "4 ranks small");
  CHECK(select_algorithm("allreduce", size_t(1) << 20, 4) == "ring", "4 ranks 1 MiB");
  CHECK(select_algorithm("allreduce", size_t(64) << 20, 4) == "twoshot", "4 ranks 64 MiB");
  CHECK(select_algorithm("allreduce", 4096, 4, "tcp") == "rdouble", "tcp small");
  CHECK(select_algorithm("allreduce", 4096, 3, "tcp") == "tree", "tcp small, 3 ranks");
  CHECK(select_algorithm("allreduce", size_t(1) << 20, 3, "tcp") == "ring", "tcp 1 MiB, 3 ranks");
  CHECK(select_algorithm("allgather", 4096, 4, "tcp") == "ring", "tcp allgather");
  expect_error([] { select_algorithm("allreduce", 1, 2, "ib"); }, Error::kInvalidArgument, "unknown transport 'ib'",
               "transport");
  expect_error([] { select_algorithm("alltoallv", 1, 2); }, Error::kInvalidArgument, "unknown operation 'alltoallv'",
               "operation");
  setenv("NEURON_CCL_ALGO", "allreduce=ring,allgather=direct", 1);
  CHECK(select_algorithm("allreduce", 4096, 2) == "ring", "forced ring");
  setenv("NEURON_CCL_ALGO", "allreduce=bogus", 1);
  expect_error([] { select_algorithm("allreduce", 1, 2); }, Error::kInvalidArgument,
               "allreduce algorithm 'bogus' unknown for the shm transport (oneshot, twoshot, ring, rdouble)", "bogus");
  setenv("NEURON_CCL_ALGO", "allreduce=twoshot", 1);
  expect_error([] { select_algorithm("allreduce", 1, 2, "tcp"); }, Error::kInvalidArgument,
               "unknown for the tcp transport (ring, rdouble, tree)", "twoshot over tcp");
  setenv("NEURON_CCL_ALGO", "ring", 1);
  expect_error([] { select_algorithm("allreduce", 1, 2); }, Error::kInvalidArgument,
               "item 'ring' is not <operation>=<algorithm>", "no '='");
  // Another operation's item is validated too, so a typo anywhere fails.
  setenv("NEURON_CCL_ALGO", "allreduce=ring,allgather=ring", 1);
  expect_error([] { select_algorithm("allreduce", 1, 2); }, Error::kInvalidArgument,
               "allgather algorithm 'ring' unknown for the shm transport (direct)", "other op's item");
  unsetenv("NEURON_CCL_ALGO");

  setenv("NEURON_CCL_SPIN", "12x", 1);
  expect_error([] { env_int("NEURON_CCL_SPIN"); }, Error::kInvalidArgument,
               "environment variable NEURON_CCL_SPIN='12x' is not an integer", "spin");
  setenv("NEURON_CCL_SPIN", "7", 1);
  CHECK(env_int("NEURON_CCL_SPIN") == 7, "spin parsed");
  unsetenv("NEURON_CCL_SPIN");
  CHECK(env_int("NEURON_CCL_SPIN") == 100, "spin default");
  setenv("NEURON_CCL_TREE_MAX_BYTES", "-", 1);
  expect_error([] { select_algorithm("allreduce", 1, 3, "tcp"); }, Error::kInvalidArgument,
               "NEURON_CCL_TREE_MAX_BYTES='-' is not an integer", "tree limit");
  unsetenv("NEURON_CCL_TREE_MAX_BYTES");
  setenv("NEURON_CCL_ONESHOT_MAX_BYTES", "64K", 1);
  expect_error([] { select_algorithm("allreduce", 1, 3); }, Error::kInvalidArgument,
               "NEURON_CCL_ONESHOT_MAX_BYTES='64K' is not an integer", "bytes with a suffix");
  unsetenv("NEURON_CCL_ONESHOT_MAX_BYTES");
  bool logic = false;
  try {
    env_string("NEURON_CCL_NOT_REGISTERED");
  } catch (const std::logic_error& e) {
    logic = std::string(e.what()).find("unregistered environment variable NEURON_CCL_NOT_REGISTERED") !=
            std::string::npos;
  }
  CHECK(logic, "unregistered variable names are a programming error");
  for (size_t i = 0; i < env_var_count(); ++i)
    CHECK(std::string(env_var(i).name).rfind("NEURON_CCL_", 0) == 0, "variable %s", env_var(i).name);
}

// ---------------------------------------------------------------- 2-rank communicator
// Key-value store on a directory: set writes a temporary file and renames it (readers never
// see half a value); get polls until the key exists.
class FileStore : public KVStore {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  void set(const std::string& key, const std::string& value) override {
    const std::string path = file(key), tmp = path + ".tmp" + std::to_string(getpid());
    {
      std::ofstream f(tmp, std::ios::binary);
      f << value;
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("FileStore: rename failed: " + path);
  }
  std::string get(const std::string& key) override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      std::ifstream f(file(key), std::ios::binary);
      if (f) {
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
      }
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("FileStore: no key " + key);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  std::string file(const std::string& key) const {
    std::string safe;
    for (char c : key) safe += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return dir_ + "/" + safe + "_" + std::to_string(std::hash<std::string>()(key));
  }
  std::string dir_;
};

void* device_alloc(int device, size_t bytes) {
  void* p = nullptr;
  if (nsimMalloc(device, bytes, &p) != NSIM_SUCCESS) throw std::runtime_error(nsimGetLastErrorMessage());
  return p;
}
void h2d(void* dst, const void* src, size_t n) {
  if (nsimMemcpy(dst, src, n, NSIM_MEMCPY_HOST_TO_DEVICE) != NSIM_SUCCESS)
    throw std::runtime_error(nsimGetLastErrorMessage());
}
void d2h(void* dst, const void* src, size_t n) {
  if (nsimMemcpy(dst, src, n, NSIM_MEMCPY_DEVICE_TO_HOST) != NSIM_SUCCESS)
    throw std::runtime_error(nsimGetLastErrorMessage());
}

// All-reduces of one communicator: both ranks' inputs are known to both, so each rank checks its
// own result against the double reference. `in_place`, or into a separate buffer at an offset
// that differs between the ranks (so the streamed outputs are not equally aligned).
void run_all_reduces(Communicator& comm, const std::string& label) {
  const int rank = comm.rank(), world = comm.size();
  struct Case {
    DataType dt;
    ReduceOp op;
    size_t count;
    bool in_place;
  };
  const Case cases[] = {
      // 1100003 float32 = 4.4 MiB: twoshot's claimed 1 MiB chunks, the last one partial.
      {DataType::kFloat32, ReduceOp::kSum, 7, true},         {DataType::kFloat32, ReduceOp::kSum, 1100003, true},
      {DataType::kFloat32, ReduceOp::kSum, 1100003, false},  {DataType::kBFloat16, ReduceOp::kAvg, 5001, true},
      {DataType::kBFloat16, ReduceOp::kAvg, 2500001, false},
      {DataType::kFloat16, ReduceOp::kPremulSum, 999, false}, {DataType::kInt32, ReduceOp::kMax, 4097, false},
      {DataType::kInt64, ReduceOp::kBxor, 33, true},          {DataType::kFloat64, ReduceOp::kMin, 1, false},
  };
  for (const Case& c : cases) {
    const size_t es = dtype_size(c.dt), bytes = c.count * es, skew = 8 * size_t(rank + 1);
    const Reduction red{c.op, 0.25};
    std::vector<std::vector<char>> inputs(world, std::vector<char>(bytes));
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < c.count; ++i) store(c.dt, inputs[r].data(), i, value(c.dt, r, i));
    char* send = static_cast<char*>(device_alloc(comm.device(), bytes + 64));
    char* recv = c.in_place ? send : static_cast<char*>(device_alloc(comm.device(), bytes + 64)) + skew;
    h2d(send, inputs[rank].data(), bytes);
    comm.all_reduce(send, recv, c.count, c.dt, red, nullptr);
    std::vector<char> got(bytes);
    d2h(got.data(), recv, bytes);
    size_t bad = 0;
    for (size_t i = 0; i < c.count; ++i) {
      std::vector<double> xs;
      for (int r = 0; r < world; ++r) xs.push_back(load(c.dt, inputs[r].data(), i));
      const double want = reference(c.dt, c.op, xs, world, 0.25), have = load(c.dt, got.data(), i);
      if (!close(c.dt, have, want) && bad++ == 0)
        CHECK(false, "%s rank %d %s/%s count %zu%s [%zu]: got %.17g, want %.17g", label.c_str(), rank,
              dtype_name(c.dt), reduce_op_name(c.op), c.count, c.in_place ? " in place" : "", i, have, want);
    }
    if (!c.in_place) {
      std::vector<char> kept(bytes);
      d2h(kept.data(), send, bytes);
      CHECK(kept == inputs[rank], "%s rank %d: the send buffer of an out-of-place all-reduce changed", label.c_str(),
            rank);
      nsimFree(recv - skew);
    }
    nsimFree(send);
  }
}

int rank_main(int rank, const std::string& dir) {
  try {
    int devices = 0;
    nsimGetDeviceCount(&devices);
    CommOptions opt;
    opt.device = rank % std::max(devices, 1);
    opt.timeout = std::chrono::seconds(30);
    opt.name = "ctest";
    auto store = std::make_shared<FileStore>(dir);
    {
      auto comm = Communicator::create(store, rank, 2, opt);
      CHECK(comm->transport() == "shm", "rank %d: transport %s", rank, comm->transport().c_str());
      for (const char* algo : {"", "oneshot", "twoshot", "ring", "rdouble"}) {
        if (*algo) setenv("NEURON_CCL_ALGO", (std::string("allreduce=") + algo).c_str(), 1);
        else unsetenv("NEURON_CCL_ALGO");
        run_all_reduces(*comm, std::string("shm ") + (*algo ? algo : "auto"));
      }
      unsetenv("NEURON_CCL_ALGO");
      comm->barrier(nullptr);
    }
    setenv("NEURON_CCL_TRANSPORT", "tcp", 1);
    opt.name = "ctest-tcp";
    auto tcp = Communicator::create(std::make_shared<FileStore>(dir + "/tcp"), rank, 2, opt);
    CHECK(tcp->transport() == "tcp", "rank %d: transport %s", rank, tcp->transport().c_str());
    for (const char* algo : {"ring", "rdouble", "tree"}) {
      setenv("NEURON_CCL_ALGO", (std::string("allreduce=") + algo).c_str(), 1);
      run_all_reduces(*tcp, std::string("tcp ") + algo);
    }
    unsetenv("NEURON_CCL_ALGO");
    tcp->barrier(nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
  return g_failures ? 1 : 0;
}

void test_two_ranks() {
  char tmpl[] = "/tmp/neuron_ccl_ctest_XXXXXX";
  if (!mkdtemp(tmpl)) {
    CHECK(false, "mkdtemp: %s", std::strerror(errno));
    return;
  }
  const std::string dir = tmpl;
  mkdir((dir + "/tcp").c_str(), 0700);
  std::fflush(nullptr);
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rank_main(r, dir));
  }
  for (int r = 0; r < 2; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d exited with status %d", r, status);
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace

int main() {
  const struct {
    const char* name;
    void (*fn)();
  } tests[] = {{"reductions", test_reductions},
               {"sum2_f32", test_sum2_f32},
               {"selection_and_env", test_selection_and_env},
               {"two_ranks", test_two_ranks}};
  for (const auto& t : tests) {
    const int before = g_failures;
    t.fn();
    std::printf("%-20s %s\n", t.name, g_failures == before ? "ok" : "FAILED");
  }
  return g_failures ? 1 : 0;
}
