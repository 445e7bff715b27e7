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

namespace torch_neuron {

c10::DeviceAllocator* device_allocator();
void record_stream(const c10::DataPtr& ptr, c10::Stream stream);

// Raw block interface used by host execution (outputs of host kernels land
// directly in device memory). Returns the device address.
void* raw_alloc(c10::DeviceIndex device, size_t nbytes);
void raw_free(void* device_ptr);
// DataPtr owning a raw_alloc'ed block, tagged with its neuron device.
c10::DataPtr adopt_raw(void* device_ptr, c10::DeviceIndex device);

}  // namespace torch_neuron
