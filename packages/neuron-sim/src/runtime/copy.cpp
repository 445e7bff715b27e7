// Checked copies and memsets: executed at once on the host aliases, placed on a queue's
// simulated timeline with the modelled duration.
#include <cstdio>
#include <cstring>
#include <string>

#include "copy_model.h"
#include "device_memory.h"
#include "error.h"

using namespace nsim;

namespace {

const char* kind_name(nsimMemcpyKind kind) {
  switch (kind) {
    case NSIM_MEMCPY_HOST_TO_HOST: return "NSIM_MEMCPY_HOST_TO_HOST";
    case NSIM_MEMCPY_HOST_TO_DEVICE: return "NSIM_MEMCPY_HOST_TO_DEVICE";
    case NSIM_MEMCPY_DEVICE_TO_HOST: return "NSIM_MEMCPY_DEVICE_TO_HOST";
    case NSIM_MEMCPY_DEVICE_TO_DEVICE: return "NSIM_MEMCPY_DEVICE_TO_DEVICE";
    case NSIM_MEMCPY_DEFAULT: return "NSIM_MEMCPY_DEFAULT";
  }
  return "an unknown kind";
}

std::string describe_pointer(const char* role, const void* p, int device) {
  char buf[128];
  if (device >= 0) {
    snprintf(buf, sizeof buf, "%s=%p is device memory (neuron device %d)", role, p, device);
  } else {
    snprintf(buf, sizeof buf, "%s=%p is host memory", role, p);
  }
  return buf;
}

bool ranges_overlap(const void* a, const void* b, size_t size) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return x < y + size && y < x + size;
}

nsimError copy(const char* call, void* dst, const void* src, size_t size, nsimMemcpyKind kind,
               nsimQueue queue_handle, bool async, bool move_bytes = true) {
  Runtime* rt = runtime_or_error(call);
  if (!rt) return runtime_unavailable();
  if (!dst || !src) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "%s: %s is NULL", call, !dst ? "dst" : "src");
  }
  if (kind < NSIM_MEMCPY_HOST_TO_HOST || kind > NSIM_MEMCPY_DEFAULT) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "%s: unknown copy kind %d", call,
                     static_cast<int>(kind));
  }
  const int dst_idx = device_index_of(dst), src_idx = device_index_of(src);
  const nsimMemcpyKind actual =
      dst_idx >= 0 ? (src_idx >= 0 ? NSIM_MEMCPY_DEVICE_TO_DEVICE : NSIM_MEMCPY_HOST_TO_DEVICE)
                   : (src_idx >= 0 ? NSIM_MEMCPY_DEVICE_TO_HOST : NSIM_MEMCPY_HOST_TO_HOST);
  if (kind != NSIM_MEMCPY_DEFAULT && kind != actual) {
    return set_error(NSIM_ERROR_INVALID_COPY,
                     "%s: kind %s does not match the pointers: %s, %s (use %s or "
                     "NSIM_MEMCPY_DEFAULT)",
                     call, kind_name(kind), describe_pointer("dst", dst, dst_idx).c_str(),
                     describe_pointer("src", src, src_idx).c_str(), kind_name(actual));
  }
  std::shared_ptr<Queue> given;
  if (async) {
    given = queue_or_error(rt, call, queue_handle);
    if (!given) return NSIM_ERROR_INVALID_QUEUE;
  }
  Device* dst_dev = nullptr;
  Device* src_dev = nullptr;
  void* dst_host = dst;
  void* src_host = const_cast<void*>(src);
  nsimError err;
  if (dst_idx >= 0 && (err = resolve_device_range(rt, call, "dst", dst, size,
                                                  NSIM_ERROR_INVALID_COPY, &dst_dev, &dst_host))) {
    return err;
  }
  if (src_idx >= 0 && (err = resolve_device_range(rt, call, "src", src, size,
                                                  NSIM_ERROR_INVALID_COPY, &src_dev, &src_host))) {
    return err;
  }
  if (actual == NSIM_MEMCPY_HOST_TO_HOST) {
    // No device is involved: a plain host copy with no simulated time.
    memmove(dst, src, size);
    return NSIM_SUCCESS;
  }
  Queue* q = nullptr;
  if (async) {
    q = given.get();
    if (q->device != dst_dev && q->device != src_dev) {
      return set_error(NSIM_ERROR_INVALID_VALUE,
                       "%s: queue %p belongs to neuron device %d, which takes no part in this "
                       "copy (%s, %s)",
                       call, static_cast<void*>(queue_handle), q->device->index,
                       describe_pointer("dst", dst, dst_idx).c_str(),
                       describe_pointer("src", src, src_idx).c_str());
    }
  } else {
    q = (dst_dev ? dst_dev : src_dev)->default_queue.get();
  }
  if ((err = check_device(q->device, call))) return err;
  if (size == 0) return NSIM_SUCCESS;
  if (!move_bytes) {
    // Timeline and counters only.
  } else if (ranges_overlap(dst_host, src_host, size)) {
    memmove(dst_host, src_host, size);
  } else {
    memcpy(dst_host, src_host, size);
  }
  const Device* model_src = src_dev ? src_dev : dst_dev;
  const Device* model_dst = dst_dev ? dst_dev : src_dev;
  const double duration = model_copy_ns(model_src, model_dst, actual, size);
  DeviceCounters& c = q->device->counters;
  uint32_t name = rt->name_d2d;
  if (actual == NSIM_MEMCPY_HOST_TO_DEVICE) {
    name = rt->name_h2d;
    c.memcpy_h2d.fetch_add(1, std::memory_order_relaxed);
    c.bytes_h2d.fetch_add(size, std::memory_order_relaxed);
  } else if (actual == NSIM_MEMCPY_DEVICE_TO_HOST) {
    name = rt->name_d2h;
    c.memcpy_d2h.fetch_add(1, std::memory_order_relaxed);
    c.bytes_d2h.fetch_add(size, std::memory_order_relaxed);
  } else {
    c.memcpy_d2d.fetch_add(1, std::memory_order_relaxed);
    c.bytes_d2d.fetch_add(size, std::memory_order_relaxed);
  }
  place_on_queue(rt, q, name, NSIM_LAUNCH_MEMCPY, duration, size, NSIM_MODEL_COPY);
  return NSIM_SUCCESS;
}

nsimError fill(const char* call, void* ptr, int value, size_t size, nsimQueue queue_handle,
               bool async) {
  Runtime* rt = runtime_or_error(call);
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> given;
  if (async) {
    given = queue_or_error(rt, call, queue_handle);
    if (!given) return NSIM_ERROR_INVALID_QUEUE;
  }
  Device* d = nullptr;
  void* alias = nullptr;
  nsimError err = resolve_device_range(rt, call, "device_ptr", ptr, size, NSIM_ERROR_INVALID_VALUE,
                                       &d, &alias);
  if (err) return err;
  Queue* q = async ? given.get() : d->default_queue.get();
  if (q->device != d) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "%s: queue %p belongs to neuron device %d but device_ptr=%p is on neuron "
                     "device %d",
                     call, static_cast<void*>(queue_handle), q->device->index, ptr, d->index);
  }
  if (size == 0) return NSIM_SUCCESS;
  memset(alias, value, size);
  d->counters.memsets.fetch_add(1, std::memory_order_relaxed);
  place_on_queue(rt, q, rt->name_memset, NSIM_LAUNCH_MEMSET, model_memset_ns(d, size), size,
                 NSIM_MODEL_COPY);
  return NSIM_SUCCESS;
}

}  // namespace

extern "C" {

NSIM_API nsimError nsimMemcpy(void* dst, const void* src, size_t size, nsimMemcpyKind kind) {
  return copy("nsimMemcpy", dst, src, size, kind, nullptr, false);
}

NSIM_API nsimError nsimMemcpyAsync(void* dst, const void* src, size_t size, nsimMemcpyKind kind,
                                   nsimQueue queue) {
  return copy("nsimMemcpyAsync", dst, src, size, kind, queue, true);
}

NSIM_API nsimError nsimMemcpyTimelineAsync(void* dst, const void* src, size_t size, nsimMemcpyKind kind,
                                           nsimQueue queue) {
  return copy("nsimMemcpyTimelineAsync", dst, src, size, kind, queue, true, /*move_bytes=*/false);
}

NSIM_API nsimError nsimMemset(void* device_ptr, int value, size_t size) {
  return fill("nsimMemset", device_ptr, value, size, nullptr, false);
}

NSIM_API nsimError nsimMemsetAsync(void* device_ptr, int value, size_t size, nsimQueue queue) {
  return fill("nsimMemsetAsync", device_ptr, value, size, queue, true);
}

}  // extern "C"
