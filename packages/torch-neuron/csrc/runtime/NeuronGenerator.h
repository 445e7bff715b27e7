// Random number generators of device `neuron`.
//
// A neuron generator is a counter-based Philox generator with CUDA's state: a 64-bit seed and
// a 64-bit offset, exported by get_state() as 16 bytes (seed in bytes 0-7, offset in 8-15).
// A random op reserves one counter per output element at the current offset and advances
// the offset by the element count rounded up to 4 (runtime/Philox.h says how values follow
// from the counters). torch's consumers of CUDA's layout -- DTensor's OffsetBasedRNGTracker,
// activation checkpointing, fork_rng -- work unchanged.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>

namespace torch_neuron {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override { return offset_; }
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // Counters for `elements` outputs: returns the first one and advances the offset past
  // them, rounded up to a multiple of 4. Callers hold mutex_.
  uint64_t reserve(uint64_t elements);

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

at::Generator make_generator(c10::DeviceIndex device);
const at::Generator& default_generator(c10::DeviceIndex device);

}  // namespace torch_neuron
