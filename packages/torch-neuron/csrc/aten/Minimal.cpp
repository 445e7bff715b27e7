// The operators every PrivateUse1 backend must provide (allocation, views,
// storage manipulation, copies, scalar reads).
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/full.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/Accounting.h"
#include "aten/HostScope.h"
#include "aten/OpRegistry.h"
#include "aten/ShapeOnly.h"
#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronHostAllocator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStorage.h"
#include "runtime/NeuronStream.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;
const c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex index_or_current(std::optional<c10::Device> device) {
  if (device && device->has_index()) {
    check_device_index(device->index());
    return device->index();
  }
  return current_device();
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == c10::Layout::Strided, "neuron: only strided tensors are supported, got layout ",
              *layout);
  c10::DeviceGuard guard(c10::Device(kNeuron, index_or_current(device)));
  return at::detail::empty_generic(size, device_allocator(), kNeuronKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout || *layout == c10::Layout::Strided, "neuron: only strided tensors are supported, got layout ",
              *layout);
  c10::DeviceGuard guard(c10::Device(kNeuron, index_or_current(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(), kNeuronKeys,
                                           c10::dtype_or_default(dtype));
}

// Storage of an efficient zero tensor: no memory, whatever the size.
struct ZeroTensorAllocator final : public c10::Allocator {
  explicit ZeroTensorAllocator(c10::Device d) : device(d) {}
  c10::DataPtr allocate(size_t) override { return c10::DataPtr(nullptr, device); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {}
  c10::Device device;
};

at::Tensor efficientzerotensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory) {
  ZeroTensorAllocator allocator(c10::Device(kNeuron, index_or_current(device)));
  const auto keys = kNeuronKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype), std::nullopt);
}

void ensure_storage_bytes(const at::Tensor& self, size_t nbytes) {
  auto* storage = self.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (nbytes > storage->nbytes()) {
    resize_storage_bytes(storage, nbytes, self.device().index());
  }
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() == size && !memory_format) return self;
  impl->set_sizes_contiguous(size);
  const size_t nbytes = at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(),
                                                                   self.storage_offset());
  ensure_storage_bytes(self, nbytes);
  if (memory_format) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  TORCH_CHECK(!source.data() || source.device().type() == kNeuron,
              "neuron: set_ expected a neuron storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  if (impl->storage().unsafeGetStorageImpl() != source.unsafeGetStorageImpl()) {
    impl->set_storage_keep_dtype(std::move(source));
  }
  std::vector<int64_t> strides(stride.begin(), stride.end());
  if (strides.empty()) {
    strides.resize(size.size());
    int64_t running = 1;
    for (size_t i = size.size(); i-- > 0;) {
      strides[i] = running;
      running *= std::max<int64_t>(size[i], 1);
    }
  }
  impl->set_sizes_and_strides(size, strides, offset);
  const size_t nbytes = at::detail::computeStorageNbytes(size, strides, self.dtype().itemsize(),
                                                         offset);
  ensure_storage_bytes(self, nbytes);
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return set_storage(self, std::move(source), offset.expect_int(), C10_AS_INTARRAYREF_SLOW(size),
                     C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  TORCH_CHECK(src.device().type() == kNeuron, "neuron: set_ expected a neuron tensor, got one on ",
              src.device());
  if (self.is_same(src)) return self;
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), 0,
      c10::DataPtr(nullptr, self.device()), device_allocator(), true));
  return set_storage(self, std::move(empty), 0, {0}, {});
}

nsimMemcpyKind copy_kind(const at::Tensor& dst, const at::Tensor& src) {
  const bool d = dst.device().type() == kNeuron, s = src.device().type() == kNeuron;
  if (d && s) return NSIM_MEMCPY_DEVICE_TO_DEVICE;
  if (d) return NSIM_MEMCPY_HOST_TO_DEVICE;
  if (s) return NSIM_MEMCPY_DEVICE_TO_HOST;
  return NSIM_MEMCPY_HOST_TO_HOST;
}

// A copy whose source holds no values (shape-only execution, ShapeOnly.h), or a large one
// between device tensors in shape-only mode: the timeline entry of the copy and no bytes moved.
// The destination then holds no values either (on the host: the source's zeros or fill).
// Returns false for copies that move values.
bool copy_without_values(at::Tensor& self, const at::Tensor& src, nsimMemcpyKind kind, c10::DeviceIndex device,
                         size_t nbytes, bool direct, const OpInfo& info) {
  if (kind == NSIM_MEMCPY_HOST_TO_DEVICE) return false;
  const std::optional<c10::Scalar> fill = valueless::fill_of(src);
  if (kind == NSIM_MEMCPY_DEVICE_TO_HOST) {
    if (!fill) return false;
    self.fill_(*fill);
    shape_only::report_read("copy to host", src);
  } else {
    if (!fill && !(shape_only::active() && double(nbytes) > shape_only::kValuedBytes)) return false;
    valueless::mark(self, fill);
    if (values_only()) return true;
  }
  if (direct) {
    NEURON_CHECK(nsimMemcpyTimelineAsync(self.data_ptr(), src.data_ptr(), nbytes, kind, current_queue(device)));
  } else {
    double ns = 0;
    NEURON_CHECK(nsimModelCopyDuration(device, kind, nbytes, &ns));
    NEURON_CHECK(nsimLaunch(current_queue(device), info.name_id, NSIM_LAUNCH_MEMCPY, ns, nullptr, nullptr));
  }
  return true;
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  static OpInfo& info = op_info_by_name("aten::copy_");
  TORCH_CHECK(self.defined() && src.defined(), "copy_: both tensors must be defined");
  if (self.is_same(src)) return self;
  TORCH_CHECK(!self._is_zerotensor(), "ZeroTensors are immutable. Please materialize the tensor using `.clone()`, if you want a mutable tensor.");
  if (src._is_zerotensor()) {
    // An efficient zero tensor has no memory: copying it writes zeros.
    self.zero_();
    return self;
  }
  const bool dst_dev = self.device().type() == kNeuron;
  const c10::DeviceIndex device = dst_dev ? self.device().index() : src.device().index();
  const nsimMemcpyKind kind = copy_kind(self, src);
  const bool direct = self.sizes() == src.sizes() && self.strides() == src.strides() &&
                      self.dtype() == src.dtype() && self.is_conj() == src.is_conj() &&
                      self.is_neg() == src.is_neg() && self.is_non_overlapping_and_dense() &&
                      (self.device().type() == kNeuron || self.device().is_cpu()) &&
                      (src.device().type() == kNeuron || src.device().is_cpu());
  const size_t nbytes = static_cast<size_t>(self.numel()) * self.element_size();
  if (nbytes == 0) {
    TORCH_CHECK(self.sizes() == src.sizes() || src.numel() <= 1 || self.numel() == 0,
                "copy_: shape mismatch ", self.sizes(), " vs ", src.sizes());
    return self;
  }
  if (C10_UNLIKELY(valueless::any() || shape_only::active())) {
    if (copy_without_values(self, src, kind, device, nbytes, direct, info)) {
      if (!values_only()) count(info, self.scalar_type(), /*native=*/true);
      return self;
    }
    if (kind != NSIM_MEMCPY_DEVICE_TO_HOST) valueless::write_values(self);
  }
  if (kind == NSIM_MEMCPY_DEVICE_TO_DEVICE && values_only()) {
    // Inside a fused kernel's chain (Accounting.h): the values only, no copy on the timeline.
    HostScope scope(device);
    at::Tensor h_dst = scope.alias(self);
    h_dst.copy_(scope.alias(src), false);
    return self;
  }
  if (direct) {
    NEURON_CHECK(nsimMemcpyAsync(self.data_ptr(), src.data_ptr(), nbytes, kind,
                                 current_queue(device)));
  } else {
    // Broadcasting, dtype conversion, strides, conj/neg: the CPU copy kernel
    // runs over host aliases of the device memory.
    HostScope scope(device);
    at::Tensor h_dst = scope.alias(self);
    at::Tensor h_src = scope.alias(src);
    h_dst.copy_(h_src, false);
    double ns = 0;
    NEURON_CHECK(nsimModelCopyDuration(device, kind, nbytes, &ns));
    NEURON_CHECK(nsimLaunch(current_queue(device), info.name_id, NSIM_LAUNCH_MEMCPY, ns, nullptr,
                            nullptr));
  }
  count(info, self.scalar_type(), /*native=*/true);
  return self;
}

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_(out, self, non_blocking);
  return dst;
}

at::Tensor _copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (dst.device().type() == kNeuron) {
      resize_(dst, self.sizes(), std::nullopt);
    } else {
      dst.resize_(self.sizes());
    }
  }
  at::Tensor out = dst;
  copy_(out, self, false);
  return dst;
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  static OpInfo& info = op_info_by_name("aten::_local_scalar_dense");
  HostScope scope(self.device().index());
  c10::Scalar s;
  if (const std::optional<c10::Scalar> fill = valueless::fill_of(self)) {
    // No values (shape-only execution): the zeros or fill the tensor reads as.
    s = at::native::_local_scalar_dense_cpu(at::full({}, *fill, self.options().device(c10::kCPU)));
    shape_only::report_read("item", self);
  } else {
    s = at::native::_local_scalar_dense_cpu(scope.alias(self));
  }
  double ns = 0;
  NEURON_CHECK(nsimModelCopyDuration(self.device().index(), NSIM_MEMCPY_DEVICE_TO_HOST,
                                     self.element_size(), &ns));
  NEURON_CHECK(nsimLaunch(current_queue(self.device().index()), info.name_id, NSIM_LAUNCH_MEMCPY,
                          ns, nullptr, nullptr));
  count(info, self.scalar_type(), /*native=*/true);
  return s;
}

void record_stream_op(at::Tensor& self, c10::Stream stream) {
  record_stream(self.storage().data_ptr(), stream);
}

}  // namespace

// c10's TensorImpl::has_compatible_shallow_copy_type lists the in-tree dense backends only and
// leaves PrivateUse1 backends to register this operator. A dense neuron tensor is a plain
// TensorImpl like a dense CPU one, so `param.data = t` across the two and nn.Module.to() keep the
// parameter object and its identity, as they do between CPU and CUDA.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    const c10::DispatchKeySet ks = t.key_set();
    return ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
           (ks.has_backend(c10::BackendComponent::CPUBit) || ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("record_stream", TORCH_FN(record_stream_op));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace torch_neuron
