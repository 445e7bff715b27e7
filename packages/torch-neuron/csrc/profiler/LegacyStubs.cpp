// torch.autograd.profiler.profile(use_device="neuron") (the legacy, non-Kineto route): each op's
// device time is the simulated time its current queue advanced between the op's entry and exit.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStream.h"

namespace torch_neuron {
namespace {

struct NeuronProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex d = current_device();
    if (device) *device = d;
    double t = 0;
    nsimQueueGetTime(current_queue(d), &t);
    *event = std::make_shared<double>(t);
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    const auto* a = static_cast<const double*>(start->get());
    const auto* b = static_cast<const double*>(end->get());
    return static_cast<float>((*b - *a) / 1e3);  // microseconds
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int d = 0; d < device_count(); ++d) op(d);
  }
  void synchronize() const override {}
};

struct Register {
  Register() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register;

}  // namespace
}  // namespace torch_neuron
