// The device address space: one inaccessible reservation holding every device's range, and
// a read-write alias reservation where each device's memfd is mapped at the same offset.
// alias = ptr - device_base + alias_base, for every device at once.
#ifndef NEURON_SIM_RUNTIME_ADDRESS_SPACE_H
#define NEURON_SIM_RUNTIME_ADDRESS_SPACE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nsim {

class AddressSpace {
 public:
  // Reserves `devices` ranges of `capacity` bytes each. False with a message on failure.
  bool create(int devices, uint64_t capacity, std::string* error);
  void destroy();
  // Gives the host pages behind [offset, offset+size) of device `d` back to the kernel.
  void release_pages(int d, uint64_t offset, uint64_t size);

  uintptr_t device_base(int d) const { return dev_base_ + uint64_t(d) * stride_; }

 private:
  uintptr_t dev_base_ = 0, alias_base_ = 0;
  uint64_t stride_ = 0, span_ = 0;
  std::vector<int> fds_;
};

// Lock-free view of the active address space, readable from the fault handler.
struct AddressView {
  uintptr_t dev_base, alias_base;
  uint64_t stride, span, capacity;
  int devices;
};
AddressView address_view();

// Device index of a device address, or -1. *offset is relative to that device's base.
inline int device_of(const AddressView& v, uintptr_t p, uint64_t* offset) {
  if (v.span == 0 || p < v.dev_base || p - v.dev_base >= v.span) return -1;
  const uint64_t rel = p - v.dev_base;
  *offset = rel % v.stride;
  return static_cast<int>(rel / v.stride);
}

}  // namespace nsim

#endif
