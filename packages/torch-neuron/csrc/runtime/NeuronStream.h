// Streams of device `neuron` are neuron_sim queues. A c10::Stream's id is the
// index of its queue in the device's queue table; id 0 is the device's default
// queue. Queues live as long as the process (like CUDA's pooled streams).
#pragma once

#include <c10/core/Stream.h>
#include <neuron_sim/neuron_sim.h>

namespace torch_neuron {

nsimQueue queue_of(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);
// Returns the previous current stream of the stream's device.
c10::Stream exchange_stream(const c10::Stream& stream);
c10::Stream new_stream(c10::DeviceIndex device, int priority);
c10::Stream stream_from_pool(c10::DeviceIndex device, bool high_priority);
int stream_priority(const c10::Stream& stream);
nsimQueue current_queue(c10::DeviceIndex device);

}  // namespace torch_neuron
