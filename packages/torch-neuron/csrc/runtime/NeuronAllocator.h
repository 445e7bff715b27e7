// Caching device allocator for `neuron` over neuron_sim device memory.
//
// Follows the CUDA caching allocator's policy: requests are rounded to 512 B;
// requests up to 1 MiB are served from 2 MiB segments (small pool), larger ones
// from 20 MiB segments or, above 10 MiB, from segments of their own size
// rounded to 2 MiB (large pool). Free blocks are cached per stream, split and
// merged; statistics use c10's DeviceStats so torch.accelerator/torch.neuron
// memory_stats report the same keys as torch.cuda.memory_stats.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

#include <array>
#include <cstdint>

namespace torch_neuron {

c10::DeviceAllocator* device_allocator();
void record_stream(const c10::DataPtr& ptr, c10::Stream stream);

// Raw block interface used by host execution (outputs of host kernels land
// directly in device memory). Returns the device address. `scratch`: a host kernel's
// allocation, counted apart until adopt_raw makes it a tensor's storage.
void* raw_alloc(c10::DeviceIndex device, size_t nbytes, bool scratch);
void raw_free(void* device_ptr);
// DataPtr owning a raw_alloc'ed block, tagged with its neuron device.
c10::DataPtr adopt_raw(void* device_ptr, c10::DeviceIndex device);

// What the program was doing when a block was allocated: the fit report's categories of the
// memory held at the peak (set from Python by the projection's step hooks).
enum class AllocationPhase : uint8_t { Setup = 0, Forward = 1, Backward = 2, Optimizer = 3 };
constexpr size_t kAllocationPhases = 4;
void set_allocation_phase(AllocationPhase phase);
AllocationPhase allocation_phase();

// Allocated bytes split into tensors' storages (by phase) and host kernels' scratch, with the
// high-water of the tensors' bytes alone and its split by phase at that moment.
struct Usage {
  std::array<size_t, kAllocationPhases> by_phase{};
  std::array<size_t, kAllocationPhases> at_peak{};
  size_t tensor_peak = 0;
  size_t scratch = 0;
  size_t scratch_peak = 0;
};
Usage usage(c10::DeviceIndex device);

}  // namespace torch_neuron
