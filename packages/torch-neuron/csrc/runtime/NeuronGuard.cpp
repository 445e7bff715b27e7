// DeviceGuardImplInterface for device `neuron`: current device, streams (neuron_sim
// queues) and events (neuron_sim events carrying simulated device time).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStream.h"
#include "runtime/SanitizerLog.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// A device without an index (torch.Stream(device="neuron")) means the current one.
c10::DeviceIndex idx(c10::Device d) { return d.has_index() ? d.index() : current_device(); }

void log_sync(SanitizerEventKind kind, const void* event, int device, int64_t stream) {
  sanitizer_log(SanitizerEvent{kind, reinterpret_cast<uintptr_t>(event), 0, device, stream, {}});
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNeuron);
    auto old = current_device();
    if (d.index() != old) {
      set_current_device(d.index());
    }
    return c10::Device(kNeuron, old);
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kNeuron);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_current_device(d.index());
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const override { return current_stream(idx(d)); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(idx(d)); }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return new_stream(idx(d), priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return stream_from_pool(idx(d), high_priority);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    // Every dtype the simulated NeuronCore stores is reported as supported.
    c10::DeviceCapability cap;
    return cap;
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event) {
      nsimEventDestroy(static_cast<nsimEvent>(event));
      if (C10_UNLIKELY(sanitizing())) log_sync(SanitizerEventKind::EventDestroy, event, -1, 0);
    }
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      nsimEvent e = nullptr;
      const unsigned flags =
          flag == c10::EventFlag::BACKEND_DEFAULT ? NSIM_EVENT_DEFAULT : NSIM_EVENT_DISABLE_TIMING;
      NEURON_CHECK(nsimEventCreate(stream.device_index(), flags, &e));
      *event = e;
    }
    NEURON_CHECK(nsimEventRecord(static_cast<nsimEvent>(*event), queue_of(stream)));
    if (C10_UNLIKELY(sanitizing())) {
      log_sync(SanitizerEventKind::EventRecord, *event, stream.device_index(), stream.id());
    }
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (!event) {
      return;
    }
    NEURON_CHECK(nsimQueueWaitEvent(queue_of(stream), static_cast<nsimEvent>(event)));
    if (C10_UNLIKELY(sanitizing())) {
      log_sync(SanitizerEventKind::EventWait, event, stream.device_index(), stream.id());
    }
  }

  bool queryEvent(void* event) const override {
    if (!event) {
      return true;
    }
    const nsimError err = nsimEventQuery(static_cast<nsimEvent>(event));
    if (err == NSIM_ERROR_NOT_READY) {
      return false;
    }
    NEURON_CHECK(err);
    return true;
  }

  bool queryStream(const c10::Stream& stream) const override {
    const nsimError err = nsimQueueQuery(queue_of(stream));
    if (err == NSIM_ERROR_NOT_READY) {
      return false;
    }
    NEURON_CHECK(err);
    return true;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    NEURON_CHECK(nsimQueueSynchronize(queue_of(stream)));
    if (C10_UNLIKELY(sanitizing())) {
      log_sync(SanitizerEventKind::StreamSync, nullptr, stream.device_index(), stream.id());
    }
  }
  void synchronizeEvent(void* event) const override {
    if (event) {
      NEURON_CHECK(nsimEventSynchronize(static_cast<nsimEvent>(event)));
      if (C10_UNLIKELY(sanitizing())) log_sync(SanitizerEventKind::EventSync, event, -1, 0);
    }
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    NEURON_CHECK(nsimDeviceSynchronize(device_index));
    if (C10_UNLIKELY(sanitizing())) log_sync(SanitizerEventKind::DeviceSync, nullptr, device_index, 0);
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    record_stream(data_ptr, stream);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end,
                "Both events must be recorded before calculating elapsed time.");
    return event_elapsed_ms(static_cast<nsimEvent>(start), static_cast<nsimEvent>(end));
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace torch_neuron
