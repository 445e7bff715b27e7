// What the stream-race sanitizer (torch_neuron.sanitizer, TORCH_NEURON_SANITIZE) needs to
// know that no op shows: allocations and frees of device blocks with their streams, event
// records and waits, stream/event/device synchronisation, record_stream.
//
// The hooks append to a log that the sanitizer's dispatch mode drains around every op, so
// nothing here calls into Python (the allocator's lock and the GIL are never held together).
// Off, each hook site costs one relaxed load.
#pragma once

#include <c10/core/Stream.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace torch_neuron {

enum class SanitizerEventKind : int {
  Alloc = 0,          // ptr, size, stream: a block handed out for use on stream
  Free = 1,           // ptr, size, stream (the block's), streams: those recorded by record_stream
  RecordStream = 2,   // ptr, stream
  EventRecord = 3,    // event, stream
  EventWait = 4,      // event, stream
  EventSync = 5,      // event: the host waited for it
  StreamSync = 6,     // stream: the host waited for it
  DeviceSync = 7,     // device: the host waited for every stream of it (also empty_cache)
  EventDestroy = 8,   // event
};

struct SanitizerEvent {
  SanitizerEventKind kind;
  uintptr_t ptr;  // block address or event handle
  uint64_t size;
  int device;
  int64_t stream;  // c10::StreamId
  std::vector<int64_t> streams;
};

extern std::atomic<bool> g_sanitizer_on;
inline bool sanitizing() { return g_sanitizer_on.load(std::memory_order_relaxed); }

void set_sanitizing(bool on);
void sanitizer_log(SanitizerEvent ev);
std::vector<SanitizerEvent> sanitizer_drain();

}  // namespace torch_neuron
