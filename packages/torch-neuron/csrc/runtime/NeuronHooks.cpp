// PrivateUse1 hooks: availability, generators, pointer queries, pinned memory,
// and storage resizing for device `neuron`.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/NeuronHostAllocator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStorage.h"

namespace torch_neuron {
namespace {

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  void init() const override { ensure_initialized(); }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < device_count();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return make_generator(device_index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    nsimPointerAttributes attr{};
    NEURON_CHECK(nsimPointerGetAttributes(data, &attr));
    TORCH_CHECK(attr.type == NSIM_MEMORY_DEVICE, "neuron: pointer ", data,
                " is not inside a live neuron device allocation");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attr.device));
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// Registered at load time, before Python renames the backend.
const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace
}  // namespace torch_neuron
