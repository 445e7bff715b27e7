#include "runtime/NeuronGenerator.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>

#include "runtime/NeuronRuntime.h"

#include <cstring>
#include <mutex>
#include <vector>

namespace torch_neuron {
namespace {

constexpr size_t kStateBytes = 16;  // seed: uint64 | offset: int64, as CUDA's Philox state

void check_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "neuron: a generator offset must be a multiple of 4 (one Philox "
              "block holds 4 numbers), got ", offset);
}

std::once_flag g_defaults_once;
std::vector<at::Generator> g_defaults;

}  // namespace

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGeneratorImpl::seed() {
  const uint64_t s = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(s);
  return s;
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) {
  check_offset(offset);
  offset_ = offset;
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::dtype(at::kByte));
  auto* bytes = state.data_ptr<uint8_t>();
  const int64_t offset = static_cast<int64_t>(offset_);
  std::memcpy(bytes, &seed_, sizeof seed_);
  std::memcpy(bytes + sizeof seed_, &offset, sizeof offset);
  return state.getIntrusivePtr();
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  const size_t n = static_cast<size_t>(new_state.numel());
  TORCH_CHECK(n == kStateBytes, "neuron: a generator state is ", kStateBytes,
              " bytes (seed: uint64, offset: int64, the layout of CUDA's Philox state), got ", n,
              " bytes", n == 5056 ? " (a CPU mt19937 state)" : "");
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  uint64_t seed = 0;
  int64_t offset = 0;
  std::memcpy(&seed, bytes, sizeof seed);
  std::memcpy(&offset, bytes + sizeof seed, sizeof offset);
  TORCH_CHECK(offset >= 0, "neuron: a generator state's offset must be non-negative, got ", offset);
  check_offset(static_cast<uint64_t>(offset));
  seed_ = seed;
  offset_ = static_cast<uint64_t>(offset);
}

uint64_t NeuronGeneratorImpl::reserve(uint64_t elements) {
  const uint64_t first = offset_;
  offset_ += (elements + 3) / 4 * 4;
  return first;
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* g = new NeuronGeneratorImpl(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

at::Generator make_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return at::make_generator<NeuronGeneratorImpl>(device);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  std::call_once(g_defaults_once, [] {
    const int n = device_count();
    for (int i = 0; i < n; ++i) {
      g_defaults.push_back(at::make_generator<NeuronGeneratorImpl>(i));
      g_defaults.back().seed();
    }
  });
  if (device < 0) device = current_device();
  check_device_index(device);
  return g_defaults[device];
}

}  // namespace torch_neuron
