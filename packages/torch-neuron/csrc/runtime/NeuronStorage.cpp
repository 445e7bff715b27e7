#include "runtime/NeuronStorage.h"

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/Valueless.h"

#include <algorithm>

namespace torch_neuron {

void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes, c10::DeviceIndex device) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  const auto& old = storage->data_ptr();
  if (old.get() && old.device().type() == c10::DeviceType::PrivateUse1 && old.device().has_index()) {
    device = old.device().index();
  } else if (device < 0) {
    device = current_device();
  }
  c10::DataPtr fresh;
  if (nbytes > 0) {
    fresh = adopt_raw(raw_alloc(device, nbytes, /*scratch=*/false), device);
    const size_t keep = std::min(nbytes, storage->nbytes());
    // A valueless storage stays valueless in its new memory, with nothing to copy.
    const bool valueless_old = valueless::moved(old.get(), fresh.get());
    if (keep > 0 && old.get() && !valueless_old) {
      NEURON_CHECK(nsimMemcpy(fresh.get(), old.get(), keep, NSIM_MEMCPY_DEVICE_TO_DEVICE));
    }
  } else {
    fresh = c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

}  // namespace torch_neuron
