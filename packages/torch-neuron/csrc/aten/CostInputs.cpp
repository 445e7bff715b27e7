#include "aten/CostInputs.h"

#include <c10/util/Exception.h>

namespace torch_neuron {

void device_mismatch(const std::string& op, const c10::Device& a, const c10::Device& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
              a, " and ", b, "! (when running ", op, " on neuron)");
}

void check_same_device(const std::string& op, std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor* first = nullptr;
  for (const at::Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
    } else if (t->device() != first->device()) {
      device_mismatch(op, first->device(), t->device());
    }
  }
}

}  // namespace torch_neuron
