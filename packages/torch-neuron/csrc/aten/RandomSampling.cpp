// Random ops of device `neuron` whose outputs are not one value per counter: multinomial,
// randperm, the samplers that draw a variable number of blocks per element (poisson,
// binomial, gamma, dirichlet) and rrelu's noise. Counters and accounting as in
// RandomKernels.cpp (aten/RandomOp.h).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "aten/RandomOp.h"

namespace torch_neuron {
namespace {

using namespace rng;

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
  r.finish(4.0 * double(rows * cats), nbytes(self), nbytes(out));
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n, bool replacement, Gen gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n, replacement, gen, out);
}

// A permutation as the order of n random 64-bit keys (ties broken by index).
at::Tensor& randperm_out(int64_t n, Gen gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  if (at::isIntegralType(out.scalar_type(), /*includeBool=*/false)) {
    // CPU's check: the largest value, n - 1, must fit the result's dtype.
    AT_DISPATCH_INTEGRAL_TYPES(out.scalar_type(), "randperm", [&] {
      TORCH_CHECK(n == 0 || n - 1 <= static_cast<int64_t>(std::numeric_limits<scalar_t>::max()),
                  "n is too large for result tensor type: '", out.toString(), "'");
    });
  } else if (at::isFloatingType(out.scalar_type())) {
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
  r.finish(double(n) * std::log2(double(std::max<int64_t>(n, 2))), 0.0, nbytes(out));
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
  for (const at::Tensor& t : inputs) in += nbytes(t);
  r.finish(30.0 * double(numel), in, nbytes(out));
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
  r.finish(3.0 * double(self.numel()), nbytes(self), nbytes(out) + nbytes(noise));
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
