// The shared part of the random ops of device `neuron` (RandomKernels.cpp,
// RandomSampling.cpp): one op's share of the neuron generator's Philox counters,
// its host scope and its accounting, and the fills over host aliases.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>
#include <optional>

#include "aten/Accounting.h"
#include "aten/CostInputs.h"
#include "aten/HostScope.h"
#include "aten/OpRegistry.h"
#include "aten/ShapeOnly.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/Philox.h"

namespace torch_neuron::rng {

using philox::ElementStream;
using philox::unit_double;
using Gen = std::optional<at::Generator>;

// Uniform in (0, 1), never 0 or 1: safe under log and tan.
inline double open_unit(const philox::Block& b, int word) {
  const uint64_t bits = ((uint64_t(b.w[word]) << 32) | b.w[word + 1]) >> 11;
  return (double(bits) + 0.5) * (1.0 / 9007199254740992.0);
}

inline double box_muller(const philox::Block& b) {
  return philox::box_muller(open_unit(b, 0), unit_double(b.w[2], b.w[3]));
}

// A neuron generator routes an op here even when its tensors live elsewhere; CPU and CUDA
// refuse the mix with this message.
inline c10::DeviceIndex checked_device(const at::Tensor& like) {
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
    OpInfo& info = op_info_by_name(op);
    on_fallback(info, dtype_);
    check_launch(info, device_);
    auto* g = at::get_generator_or_default<NeuronGeneratorImpl>(gen, default_generator(device_));
    std::lock_guard<std::mutex> lock(g->mutex_);
    seed_ = g->current_seed();
    base_ = g->reserve(counters);
  }
  ElementStream stream(uint64_t i) const { return ElementStream(seed_, base_ + i); }
  philox::Block block(uint64_t i) const { return stream(i).first(); }
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

// Runs body(op, host alias of `self`) with counters for every element of `self`, then accounts it.
template <typename Body>
void fill_elements(const char* op, const at::Tensor& self, const Gen& gen, double flops_per_element,
                   Body body) {
  RandomOp r(op, self, gen, static_cast<uint64_t>(self.numel()));
  if (C10_UNLIKELY(shape_only::active()) && nbytes(self) > shape_only::kValuedBytes) {
    // Shape-only execution: the counters advance as when the values are drawn.
    valueless::mark(self);
  } else {
    at::Tensor host = r.scope().alias(self);
    body(r, host);
    valueless::write_values(self);
  }
  r.finish(flops_per_element * double(self.numel()), 0.0, nbytes(self));
}

#define NEURON_DISPATCH_FLOATING(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)
#define NEURON_DISPATCH_ALL(dtype, name, ...)                                                       \
  AT_DISPATCH_V2(dtype, name, AT_WRAP(__VA_ARGS__), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, \
                 at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES))

}  // namespace torch_neuron::rng
