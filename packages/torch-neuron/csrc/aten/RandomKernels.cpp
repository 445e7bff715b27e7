// Random ops of device `neuron`: every op that draws random numbers, over the neuron
// generator's Philox counters (runtime/NeuronGenerator.h, runtime/Philox.h).
//
// Output element i takes its numbers from counter (offset + i), so values are a function of
// (seed, offset + i) alone, and the generator's offset advances by the element count rounded
// up to 4. The argument checks and parameter transforms are ATen's own
// (ATen/native/DistributionTemplates.h, which CPU and CUDA share); only the values differ.
// Ops that consume a variable number of draws per element (poisson, binomial, gamma) draw
// further blocks of the same counter. These run on the host, as the chip's random ops do
// under TorchNeuron, and count as fallbacks.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <vector>

#include "aten/HostExecution.h"
#include "aten/OpAccounting.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/Philox.h"

namespace torch_neuron {
namespace {

using philox::ElementStream;
using philox::unit_double;
using Gen = std::optional<at::Generator>;

double bytes_of(const at::Tensor& t) { return t.defined() ? double(t.numel()) * t.element_size() : 0.0; }

// Uniform in (0, 1), never 0 or 1: safe under log and tan.
double open_unit(const philox::Block& b, int word) {
  const uint64_t bits = ((uint64_t(b.w[word]) << 32) | b.w[word + 1]) >> 11;
  return (double(bits) + 0.5) * (1.0 / 9007199254740992.0);
}

double box_muller(const philox::Block& b) {
  return std::sqrt(-2.0 * std::log(open_unit(b, 0))) * std::cos(2.0 * M_PI * unit_double(b.w[2], b.w[3]));
}

// A neuron generator routes an op here even when its tensors live elsewhere; CPU and CUDA
// refuse the mix with this message.
c10::DeviceIndex checked_device(const at::Tensor& like) {
  TORCH_CHECK(like.device().type() == c10::DeviceType::PrivateUse1, "Expected a '",
              c10::DeviceTypeName(like.device().type(), /*lower_case=*/true),
              "' device type for generator but found 'neuron'");
  return like.device().index();
}

// One random op's host execution: its share of the generator's counters, its host scope,
// and its accounting as a host kernel.
class RandomOp {
 public:
  RandomOp(const char* op, const at::Tensor& like, const Gen& gen, uint64_t counters)
      : op_(op), device_(checked_device(like)), dtype_(like.scalar_type()), scope_(device_) {
    on_fallback(op_info_by_name(op), dtype_);
    auto* g = at::get_generator_or_default<NeuronGeneratorImpl>(gen, default_generator(device_));
    std::lock_guard<std::mutex> lock(g->mutex_);
    seed_ = g->current_seed();
    base_ = g->reserve(counters);
  }
  ElementStream stream(uint64_t i) const { return ElementStream(seed_, base_ + i); }
  philox::Block block(uint64_t i) const { return philox::philox4x32_10(base_ + i, 0, seed_); }
  HostScope& scope() { return scope_; }
  void finish(double flops, double bytes_in, double bytes_out) {
    account_host_kernel(op_, device_, dtype_, flops, bytes_in, bytes_out);
  }

 private:
  const char* op_;
  c10::DeviceIndex device_;
  c10::ScalarType dtype_;
  HostScope scope_;
  uint64_t seed_ = 0, base_ = 0;
};

// Writes value(i) of type T into every element of `host` (an alias of a neuron tensor), i
// being the element's index in row-major order whatever the strides.
template <typename T, typename F>
void fill_host(at::Tensor& host, F value) {
  at::Tensor dst = host.is_contiguous() ? host : at::empty(host.sizes(), host.options());
  T* p = dst.data_ptr<T>();
  at::parallel_for(0, dst.numel(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] = value(static_cast<uint64_t>(i));
  });
  if (!dst.is_same(host)) host.copy_(dst);
}

// Fills neuron tensor `self` with value(block of element i), dispatched over `Types`.
template <typename Body>
void fill_elements(const char* op, const at::Tensor& self, const Gen& gen, double flops_per_element,
                   Body body) {
  RandomOp r(op, self, gen, static_cast<uint64_t>(self.numel()));
  at::Tensor host = r.scope().alias(self);
  body(r, host);
  r.finish(flops_per_element * double(self.numel()), 0.0, bytes_of(self));
}

#define NEURON_DISPATCH_FLOATING(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)
#define NEURON_DISPATCH_ALL(dtype, name, ...)                                                       \
  AT_DISPATCH_V2(dtype, name, AT_WRAP(__VA_ARGS__), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, \
                 at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES))

// Casts v into [from, to): values that round up to `to` in a narrow type take `from`.
template <typename T>
T in_half_open(double v, double from, double to) {
  const T t = static_cast<T>(v);
  return static_cast<double>(t) >= to && from < to ? static_cast<T>(from) : t;
}

template <typename RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to, Gen gen) {
    const at::Tensor& self = iter.tensor(0);
    fill_elements("aten::uniform_", self, gen, 2.0, [&](RandomOp& r, at::Tensor& host) {
      NEURON_DISPATCH_FLOATING(self.scalar_type(), "uniform_", [&] {
        fill_host<scalar_t>(host, [&](uint64_t i) {
          const philox::Block b = r.block(i);
          return in_half_open<scalar_t>(from + unit_double(b.w[0], b.w[1]) * (to - from), from, to);
        });
      });
    });
  }
};

template <typename RNG>
struct NormalKernel {
  void operator()(const at::TensorBase& self_base, double mean, double std, Gen gen) {
    const at::Tensor self(self_base);
    fill_elements("aten::normal_", self, gen, 20.0, [&](RandomOp& r, at::Tensor& host) {
      NEURON_DISPATCH_FLOATING(self.scalar_type(), "normal_", [&] {
        fill_host<scalar_t>(host, [&](uint64_t i) { return static_cast<scalar_t>(mean + std * box_muller(r.block(i))); });
      });
    });
  }
};

// An integer uniform in [0, range) (range 0 meaning 2^64) from one block.
uint64_t below(const philox::Block& b, uint64_t range) {
  if (range != 0 && range <= (uint64_t(1) << 32)) return b.w[0] % range;
  const uint64_t bits = (uint64_t(b.w[0]) << 32) | b.w[1];
  return range == 0 ? bits : bits % range;
}

template <typename T>
T from_integer(int64_t v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v);
  } else {
    return static_cast<T>(static_cast<double>(v));
  }
}

void random_in_range(const char* op, const at::Tensor& self, uint64_t range, int64_t base, const Gen& gen) {
  fill_elements(op, self, gen, 2.0, [&](RandomOp& r, at::Tensor& host) {
    NEURON_DISPATCH_ALL(self.scalar_type(), "random_", [&] {
      fill_host<scalar_t>(host, [&](uint64_t i) {
        return from_integer<scalar_t>(static_cast<int64_t>(static_cast<uint64_t>(base) + below(r.block(i), range)));
      });
    });
  });
}

template <typename RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base, Gen gen) {
    random_in_range("aten::random_", iter.tensor(0), range, base, gen);
  }
  void operator()(at::TensorIteratorBase& iter, Gen gen) {  // the whole int64 range
    random_in_range("aten::random_", iter.tensor(0), 0, std::numeric_limits<int64_t>::lowest(), gen);
  }
};

// random_() without bounds: [0, 2^mantissa] for floating types, [0, max] for integers.
template <typename RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter, Gen gen) {
    const at::Tensor& self = iter.tensor(0);
    uint64_t range = 0;
    NEURON_DISPATCH_ALL(self.scalar_type(), "random_", [&] {
      if constexpr (std::is_same_v<scalar_t, bool>) {
        range = 2;
      } else if constexpr (std::is_floating_point_v<scalar_t> || std::is_same_v<scalar_t, at::Half> ||
                           std::is_same_v<scalar_t, at::BFloat16>) {
        range = (uint64_t(1) << std::numeric_limits<scalar_t>::digits) + 1;
      } else {
        range = static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1;  // 0 for uint64: 2^64
      }
    });
    random_in_range("aten::random_", self, range, 0, gen);
  }
};

#define NEURON_SCALAR_DISTRIBUTION(Kernel, op, DISPATCH, flops, expr)                                     \
  template <typename RNG>                                                                       \
  struct Kernel {                                                                               \
    template <typename... P>                                                                    \
    void operator()(at::TensorIteratorBase& iter, P... params) {                                \
      run(iter.tensor(0), params...);                                                           \
    }                                                                                           \
    void run(const at::Tensor& self, double a, Gen gen) { run2(self, a, 0.0, gen); }            \
    void run(const at::Tensor& self, double a, double b, Gen gen) { run2(self, a, b, gen); }    \
    void run2(const at::Tensor& self, double a, double b, const Gen& gen) {                     \
      (void)b;                                                                                  \
      fill_elements(op, self, gen, flops, [&](RandomOp& r, at::Tensor& host) {                  \
        DISPATCH(self.scalar_type(), op, [&] {                                                  \
          fill_host<scalar_t>(host, [&](uint64_t i) {                                           \
            const philox::Block blk = r.block(i);                                               \
            return static_cast<scalar_t>(expr);                                                 \
          });                                                                                   \
        });                                                                                     \
      });                                                                                       \
    }                                                                                           \
  };

// geometric_ takes integer outputs too, as on CPU and CUDA.
#define NEURON_DISPATCH_NUMBERS(dtype, name, ...) AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)
NEURON_SCALAR_DISTRIBUTION(ExponentialKernel, "aten::exponential_", NEURON_DISPATCH_FLOATING, 20.0, -std::log(open_unit(blk, 0)) / a)
NEURON_SCALAR_DISTRIBUTION(GeometricKernel, "aten::geometric_", NEURON_DISPATCH_NUMBERS, 40.0,
                           std::ceil(std::log(open_unit(blk, 0)) / std::log1p(-a)))
NEURON_SCALAR_DISTRIBUTION(LogNormalKernel, "aten::log_normal_", NEURON_DISPATCH_FLOATING, 30.0, std::exp(a + b * box_muller(blk)))
NEURON_SCALAR_DISTRIBUTION(CauchyKernel, "aten::cauchy_", NEURON_DISPATCH_FLOATING, 30.0,
                           a + b * std::tan(M_PI * (open_unit(blk, 0) - 0.5)))
#undef NEURON_SCALAR_DISTRIBUTION
#undef NEURON_DISPATCH_NUMBERS

template <typename RNG>
struct BernoulliKernel {
  void operator()(const at::TensorBase& self_base, double p, Gen gen) {
    const at::Tensor self(self_base);
    fill_elements("aten::bernoulli_", self, gen, 2.0, [&](RandomOp& r, at::Tensor& host) {
      NEURON_DISPATCH_ALL(self.scalar_type(), "bernoulli_", [&] {
        fill_host<scalar_t>(host, [&](uint64_t i) {
          const philox::Block b = r.block(i);
          return from_integer<scalar_t>(unit_double(b.w[0], b.w[1]) < p);
        });
      });
    });
  }
  void operator()(const at::TensorBase& self_base, const at::TensorBase& p_base, Gen gen) {
    const at::Tensor self(self_base), p(p_base);
    fill_elements("aten::bernoulli_", self, gen, 2.0, [&](RandomOp& r, at::Tensor& host) {
      const at::Tensor hp = r.scope().alias(p).expand(self.sizes()).to(at::kDouble).contiguous();
      const double* prob = hp.data_ptr<double>();
      NEURON_DISPATCH_ALL(self.scalar_type(), "bernoulli_", [&] {
        fill_host<scalar_t>(host, [&](uint64_t i) {
          const philox::Block b = r.block(i);
          return from_integer<scalar_t>(unit_double(b.w[0], b.w[1]) < prob[i]);
        });
      });
    });
  }
};

using NeuronRNG = NeuronGeneratorImpl;
namespace tpl = at::native::templates;

at::Tensor& uniform_(at::Tensor& self, double from, double to, Gen gen) {
  return tpl::uniform_impl_<UniformKernel, NeuronRNG>(self, from, to, gen);
}
at::Tensor& normal_(at::Tensor& self, double mean, double std, Gen gen) {
  return tpl::normal_impl_<NormalKernel, NeuronRNG>(self, mean, std, gen);
}
at::Tensor normal_tensor_float(const at::Tensor& mean, double std, Gen gen) {
  return tpl::normal_impl<NormalKernel, NeuronRNG>(mean, std, gen);
}
at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std, Gen gen, at::Tensor& out) {
  return tpl::normal_out_impl<NormalKernel, NeuronRNG>(out, mean, std, gen);
}
at::Tensor normal_float_tensor(double mean, const at::Tensor& std, Gen gen) {
  return tpl::normal_impl<NormalKernel, NeuronRNG>(mean, std, gen);
}
at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std, Gen gen, at::Tensor& out) {
  return tpl::normal_out_impl<NormalKernel, NeuronRNG>(out, mean, std, gen);
}
at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std, Gen gen) {
  return tpl::normal_impl<NormalKernel, NeuronRNG>(mean, std, gen);
}
at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std, Gen gen, at::Tensor& out) {
  return tpl::normal_out_impl<NormalKernel, NeuronRNG>(out, mean, std, gen);
}
at::Tensor& random_from_to(at::Tensor& self, int64_t from, std::optional<int64_t> to, Gen gen) {
  return tpl::random_from_to_impl<RandomFromToKernel, NeuronRNG>(self, from, to, gen);
}
at::Tensor& random_to(at::Tensor& self, int64_t to, Gen gen) {
  return tpl::random_from_to_impl<RandomFromToKernel, NeuronRNG>(self, 0, to, gen);
}
at::Tensor& random_full(at::Tensor& self, Gen gen) {
  return tpl::random_impl<RandomKernel, NeuronRNG>(self, gen);
}
at::Tensor& exponential_(at::Tensor& self, double lambd, Gen gen) {
  return tpl::exponential_impl_<ExponentialKernel, NeuronRNG>(self, lambd, gen);
}
at::Tensor& geometric_(at::Tensor& self, double p, Gen gen) {
  return tpl::geometric_impl_<GeometricKernel, NeuronRNG>(self, p, gen);
}
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, Gen gen) {
  return tpl::log_normal_impl_<LogNormalKernel, NeuronRNG>(self, mean, std, gen);
}
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, Gen gen) {
  return tpl::cauchy_impl_<CauchyKernel, NeuronRNG>(self, median, sigma, gen);
}
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, Gen gen) {
  return tpl::bernoulli_impl_<BernoulliKernel, NeuronRNG>(self, p, gen);
}
at::Tensor& bernoulli_float_(at::Tensor& self, double p, Gen gen) {
  return tpl::bernoulli_impl_<BernoulliKernel, NeuronRNG>(self, p, gen);
}
at::Tensor& bernoulli_out(const at::Tensor& self, Gen gen, at::Tensor& out) {
  return tpl::bernoulli_out_impl<BernoulliKernel, NeuronRNG>(out, self, gen);
}

// Dropout mask from bernoulli(1 - p) over the input's elements; the CPU kernel would draw
// from CPU's default generator (native_dropout takes no generator argument).
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (input.numel() == 0 || !train.value_or(true)) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1.0 - p;
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  RandomOp r("aten::native_dropout", input, std::nullopt, static_cast<uint64_t>(input.numel()));
  at::Tensor hmask = r.scope().alias(mask);
  fill_host<bool>(hmask, [&](uint64_t i) {
    const philox::Block b = r.block(i);
    return unit_double(b.w[0], b.w[1]) < keep;
  });
  at::Tensor out = r.scope().result(r.scope().alias(input).mul(hmask).mul_(scale));
  r.finish(3.0 * double(input.numel()), bytes_of(input), bytes_of(input) + double(input.numel()));
  return {out, mask};
}

// ---- ops whose outputs are not one value per counter ----

void check_multinomial(const at::Tensor& self, int64_t n, bool replacement) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  TORCH_CHECK(replacement || n <= self.size(-1), "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(self.size(-1) <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n, bool replacement, Gen gen, at::Tensor& out) {
  check_multinomial(self, n, replacement);
  TORCH_CHECK(out.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", out.scalar_type());
  const int64_t rows = self.dim() == 1 ? 1 : self.size(0), cats = self.size(-1);
  if (self.dim() == 1) out.resize_({n}); else out.resize_({rows, n});
  // Without replacement (and for single draws), CUDA's exponential race: the top n of p / E,
  // E ~ Exp(1) per category; with replacement, inverse-CDF draws.
  const bool race = !replacement || n == 1;
  RandomOp r("aten::multinomial", self, gen, static_cast<uint64_t>(rows * (race ? cats : n)));
  const at::Tensor p = r.scope().alias(self).to(at::kDouble).reshape({rows, cats}).contiguous();
  const double* prob = p.data_ptr<double>();
  for (int64_t i = 0; i < rows * cats; ++i) {
    TORCH_CHECK(std::isfinite(prob[i]) && prob[i] >= 0, "probability tensor contains either `inf`, `nan` or element < 0");
  }
  at::Tensor result = at::empty({rows, n}, at::kLong);
  int64_t* res = result.data_ptr<int64_t>();
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> keys(cats);
    std::vector<int64_t> order(cats);
    for (int64_t row = begin; row < end; ++row) {
      const double* pr = prob + row * cats;
      const double total = std::accumulate(pr, pr + cats, 0.0);
      const int64_t positive = std::count_if(pr, pr + cats, [](double v) { return v > 0; });
      TORCH_CHECK(total > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
      if (race) {
        TORCH_CHECK(positive >= n, "invalid multinomial distribution (with replacement=False, not enough non-negative "
                    "category to sample)");
        for (int64_t c = 0; c < cats; ++c) {
          const double e = -std::log(open_unit(r.block(uint64_t(row * cats + c)), 0));
          keys[c] = pr[c] > 0 ? pr[c] / e : -1.0;
        }
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + n, order.end(),
                          [&](int64_t a, int64_t b) { return keys[a] > keys[b] || (keys[a] == keys[b] && a < b); });
        std::copy(order.begin(), order.begin() + n, res + row * n);
      } else {
        std::vector<double> cdf(cats);
        std::partial_sum(pr, pr + cats, cdf.begin());
        for (int64_t s = 0; s < n; ++s) {
          const philox::Block b = r.block(uint64_t(row * n + s));
          const double target = unit_double(b.w[0], b.w[1]) * total;
          int64_t c = std::upper_bound(cdf.begin(), cdf.end(), target) - cdf.begin();
          while (c > 0 && (c >= cats || pr[c] == 0)) --c;  // rounding at the top, empty categories
          res[row * n + s] = c;
        }
      }
    }
  });
  r.scope().alias(out).copy_(self.dim() == 1 ? result.view({n}) : result);
  r.finish(4.0 * double(rows * cats), bytes_of(self), bytes_of(out));
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n, bool replacement, Gen gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n, replacement, gen, out);
}

// A permutation as the order of n random 64-bit keys (ties broken by index).
at::Tensor& randperm_out(int64_t n, Gen gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  if (at::isFloatingType(out.scalar_type())) {
    NEURON_DISPATCH_FLOATING(out.scalar_type(), "randperm", [&] {
      const int64_t limit = (int64_t(1) << std::numeric_limits<scalar_t>::digits) + 1;
      TORCH_CHECK(n <= limit, "n cannot be greater than 2^", std::numeric_limits<scalar_t>::digits, "+1 for ",
                  out.scalar_type(), " type.");
    });
  }
  out.resize_({n});
  RandomOp r("aten::randperm", out, gen, static_cast<uint64_t>(n));
  std::vector<uint64_t> keys(n);
  at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const philox::Block b = r.block(uint64_t(i));
      keys[i] = (uint64_t(b.w[0]) << 32) | b.w[1];
    }
  });
  at::Tensor order = at::empty({n}, at::kLong);
  int64_t* o = order.data_ptr<int64_t>();
  std::iota(o, o + n, int64_t(0));
  std::sort(o, o + n, [&](int64_t a, int64_t b) { return keys[a] < keys[b] || (keys[a] == keys[b] && a < b); });
  r.scope().alias(out).copy_(order);
  r.finish(double(n) * std::log2(double(std::max<int64_t>(n, 2))), 0.0, bytes_of(out));
  return out;
}

// Poisson: Knuth's product of uniforms for small rates, Hormann's transformed rejection
// (PTRS, 1993) above.
double sample_poisson(ElementStream& s, double lambda) {
  if (lambda == 0) return 0;
  if (lambda < 10) {
    const double limit = std::exp(-lambda);
    double product = s.uniform_open_zero();
    int64_t k = 0;
    while (product > limit) {
      product *= s.uniform_open_zero();
      ++k;
    }
    return double(k);
  }
  const double slam = std::sqrt(lambda), loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  const double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
  while (true) {
    const double u = s.uniform() - 0.5, v = s.uniform_open_zero();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2 * a / us + b) * u + lambda + 0.43);
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(inv_alpha) - std::log(a / (us * us) + b) <= -lambda + k * loglam - std::lgamma(k + 1)) {
      return k;
    }
  }
}

// Binomial: waiting times between successes for small means, Hormann's BTRS (1993) above.
double sample_binomial(ElementStream& s, double count, double prob) {
  if (!(count > 0) || !(prob > 0)) return 0;
  if (prob >= 1) return count;
  if (prob > 0.5) return count - sample_binomial(s, count, 1 - prob);
  if (count * prob < 10) {
    const double log_q = std::log1p(-prob);
    double trials = 0, successes = 0;
    while (true) {
      trials += std::ceil(std::log(s.uniform_open_zero()) / log_q);
      if (trials > count) return successes;
      ++successes;
    }
  }
  const double q = 1 - prob, spq = std::sqrt(count * prob * q);
  const double b = 1.15 + 2.53 * spq, a = -0.0873 + 0.0248 * b + 0.01 * prob, c = count * prob + 0.5;
  const double vr = 0.92 - 4.2 / b, alpha = (2.83 + 5.1 / b) * spq, lpq = std::log(prob / q);
  const double m = std::floor((count + 1) * prob);
  const double h = std::lgamma(m + 1) + std::lgamma(count - m + 1);
  while (true) {
    const double u = s.uniform() - 0.5, v = s.uniform_open_zero();
    const double us = 0.5 - std::fabs(u);
    const double k = std::floor((2 * a / us + b) * u + c);
    if (k < 0 || k > count) continue;
    if (us >= 0.07 && v <= vr) return k;
    const double lv = std::log(v * alpha / (a / (us * us) + b));
    if (lv <= h - std::lgamma(k + 1) - std::lgamma(count - k + 1) + (k - m) * lpq) return k;
  }
}

// Gamma(alpha, 1): Marsaglia and Tsang (2000), boosted by U^(1/alpha) below alpha = 1.
double sample_gamma(ElementStream& s, double alpha) {
  if (!(alpha > 0)) return 0;
  double boost = 1;
  if (alpha < 1) {
    boost = std::pow(s.uniform_open_zero(), 1 / alpha);
    alpha += 1;
  }
  const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  while (true) {
    double x, v;
    do {
      x = s.normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = s.uniform_open_zero();
    if (u < 1 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) {
      return boost * d * v;
    }
  }
}

// Elementwise sampler over `inputs` (broadcast together), output in the first input's dtype.
template <typename Sample>
at::Tensor sample_elementwise(const char* op, std::vector<at::Tensor> inputs, const Gen& gen, double min_positive,
                              Sample sample) {
  const at::Tensor& like = inputs[0];
  TORCH_CHECK(at::isFloatingType(like.scalar_type()), op, " expects a floating-point input, got ", like.scalar_type());
  std::vector<int64_t> shape = like.sizes().vec();
  for (const at::Tensor& t : inputs) shape = at::infer_size(shape, t.sizes());
  at::Tensor out = at::empty(shape, like.options());
  int64_t numel = out.numel();
  RandomOp r(op, like, gen, static_cast<uint64_t>(numel));
  std::vector<at::Tensor> host;
  for (const at::Tensor& t : inputs) host.push_back(r.scope().alias(t).expand(shape).to(at::kDouble).contiguous());
  at::Tensor result = at::empty(shape, at::kDouble);
  double* res = result.data_ptr<double>();
  const double* x0 = host[0].data_ptr<double>();
  const double* x1 = host.size() > 1 ? host[1].data_ptr<double>() : nullptr;
  at::parallel_for(0, numel, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ElementStream s = r.stream(uint64_t(i));
      const double v = sample(s, x0[i], x1 ? x1[i] : 0.0);
      res[i] = min_positive > 0 ? std::max(v, min_positive) : v;
    }
  });
  r.scope().alias(out).copy_(result);
  double in = 0;
  for (const at::Tensor& t : inputs) in += bytes_of(t);
  r.finish(30.0 * double(numel), in, bytes_of(out));
  return out;
}

at::Tensor poisson(const at::Tensor& rates, Gen gen) {
  return sample_elementwise("aten::poisson", {rates}, gen, 0.0, [](ElementStream& s, double lambda, double) {
    TORCH_CHECK(lambda >= 0, "invalid Poisson rate, expected rate to be non-negative");
    return sample_poisson(s, lambda);
  });
}

at::Tensor binomial(const at::Tensor& count, const at::Tensor& prob, Gen gen) {
  return sample_elementwise("aten::binomial", {count, prob}, gen, 0.0,
                            [](ElementStream& s, double n, double p) { return sample_binomial(s, n, p); });
}

double smallest_normal(c10::ScalarType dtype) {
  double v = 0;
  NEURON_DISPATCH_FLOATING(dtype, "gamma", [&] { v = static_cast<double>(std::numeric_limits<scalar_t>::min()); });
  return v;
}

at::Tensor standard_gamma(const at::Tensor& alpha, Gen gen) {
  return sample_elementwise("aten::_standard_gamma", {alpha}, gen, smallest_normal(alpha.scalar_type()),
                            [](ElementStream& s, double a, double) { return sample_gamma(s, a); });
}

at::Tensor sample_dirichlet(const at::Tensor& alpha, Gen gen) {
  at::Tensor g = standard_gamma(alpha, gen);
  return g / g.sum(-1, /*keepdim=*/true);
}

// RReLU in training draws one uniform(lower, upper) slope per element (used where x <= 0).
at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                                 const at::Scalar& upper, bool training, Gen gen, at::Tensor& out) {
  const double lo = lower.toDouble(), hi = upper.toDouble();
  if (!training) {
    at::Tensor r = at::leaky_relu(self, (lo + hi) / 2);
    if (!out.is_same(self)) out.resize_(r.sizes());
    out.copy_(r);
    return out;
  }
  TORCH_CHECK(noise.numel() == self.numel(), "rrelu_with_noise: noise has ", noise.numel(),
              " elements, the input ", self.numel());
  RandomOp r("aten::rrelu_with_noise", self, gen, static_cast<uint64_t>(self.numel()));
  const at::Tensor x = r.scope().alias(self).contiguous();
  at::Tensor hnoise = r.scope().alias(noise), hout = at::empty_like(x);
  NEURON_DISPATCH_FLOATING(self.scalar_type(), "rrelu_with_noise", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* op = hout.data_ptr<scalar_t>();
    at::Tensor hn = hnoise.view(x.sizes());
    fill_host<scalar_t>(hn, [&](uint64_t i) {
      const philox::Block b = r.block(i);
      const double slope = lo + unit_double(b.w[0], b.w[1]) * (hi - lo);
      const bool negative = static_cast<double>(xp[i]) <= 0;
      op[i] = negative ? static_cast<scalar_t>(static_cast<double>(xp[i]) * slope) : xp[i];
      return static_cast<scalar_t>(negative ? slope : 1.0);
    });
  });
  if (!out.is_same(self)) out.resize_(self.sizes());
  r.scope().alias(out).copy_(hout);
  r.finish(3.0 * double(self.numel()), bytes_of(self), bytes_of(out) + bytes_of(noise));
  return out;
}

at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                            const at::Scalar& upper, bool training, Gen gen) {
  at::Tensor out = at::empty_like(self);
  return rrelu_with_noise_out(self, noise, lower, upper, training, gen, out);
}

at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                              const at::Scalar& upper, bool training, Gen gen) {
  return rrelu_with_noise_out(self, noise, lower, upper, training, gen, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tensor_float));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tensor_float_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_float_tensor));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_float_tensor_out));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tensor_tensor));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tensor_tensor_out));
  m.impl("random_.from", TORCH_FN(random_from_to));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_full));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("poisson", TORCH_FN(poisson));
  m.impl("binomial", TORCH_FN(binomial));
  m.impl("_standard_gamma", TORCH_FN(standard_gamma));
  m.impl("_sample_dirichlet", TORCH_FN(sample_dirichlet));
  m.impl("rrelu_with_noise", TORCH_FN(rrelu_with_noise));
  m.impl("rrelu_with_noise.out", TORCH_FN(rrelu_with_noise_out));
  m.impl("rrelu_with_noise_", TORCH_FN(rrelu_with_noise_));
}

}  // namespace torch_neuron
