#include "runtime/NeuronGenerator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/GeneratorImpl.h>

#include "runtime/NeuronRuntime.h"

#include <memory>
#include <mutex>
#include <vector>

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val)
      : c10::GeneratorImpl(c10::Device(kNeuron, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  void set_current_seed(uint64_t seed) override { engine_.set_current_seed(seed); }
  void set_offset(uint64_t offset) override { engine_.set_offset(offset); }
  uint64_t get_offset() const override { return engine_.get_offset(); }
  uint64_t current_seed() const override { return engine_.current_seed(); }
  uint64_t seed() override { return engine_.seed(); }
  void set_state(const c10::TensorImpl& new_state) override {
    engine_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return engine_.unsafeGetGeneratorImpl()->get_state();
  }
  static c10::DeviceType device_type() { return kNeuron; }

  const at::Generator& engine() const { return engine_; }

 private:
  NeuronGeneratorImpl* clone_impl() const override {
    auto* g = new NeuronGeneratorImpl(device().index());
    g->engine_ = engine_.clone();
    return g;
  }
  at::Generator engine_;
};

std::once_flag g_defaults_once;
std::vector<at::Generator> g_defaults;

}  // namespace

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

at::Generator engine_of(const at::Generator& gen) {
  auto* impl = dynamic_cast<NeuronGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl, "neuron: expected a generator of device neuron, got one of ", gen.device());
  return impl->engine();
}

}  // namespace torch_neuron
