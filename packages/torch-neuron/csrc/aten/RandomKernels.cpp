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
#include <ATen/native/DistributionTemplates.h>
#include <torch/library.h>

#include <limits>

#include "aten/RandomOp.h"

namespace torch_neuron {
namespace {

using namespace rng;

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
  if (C10_UNLIKELY(shape_only::active()) &&
      (nbytes(input) > shape_only::kValuedBytes || valueless::contains(input))) {
    at::Tensor out = at::empty_like(input);
    valueless::mark(mask);
    valueless::mark(out);
    r.finish(3.0 * double(input.numel()), nbytes(input), nbytes(input) + double(input.numel()));
    return {out, mask};
  }
  at::Tensor hmask = r.scope().alias(mask);
  fill_host<bool>(hmask, [&](uint64_t i) {
    const philox::Block b = r.block(i);
    return unit_double(b.w[0], b.w[1]) < keep;
  });
  at::Tensor out = r.scope().result(r.scope().alias(input).mul(hmask).mul_(scale));
  r.finish(3.0 * double(input.numel()), nbytes(input), nbytes(input) + double(input.numel()));
  return {out, mask};
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
}

}  // namespace torch_neuron
