#include "aten/HostScope.h"

#include <c10/core/StorageImpl.h>

#include <cstring>

#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/Valueless.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

bool is_neuron(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// Host aliases reach device memory without a runtime call: a forked child stops here.
c10::DeviceIndex usable(c10::DeviceIndex device) {
  if (C10_UNLIKELY(in_bad_fork())) ensure_initialized();
  return device;
}

// Moves the memory behind a host storage into device ownership. The host
// storage keeps a non-owning alias so host tensors stay valid in this scope.
c10::DataPtr take_into_device(c10::StorageImpl* hs, c10::DeviceIndex device, void** alias) {
  const size_t n = hs->nbytes();
  const c10::DataPtr& cur = hs->data_ptr();
  if (n == 0 || cur.get() == nullptr) {
    *alias = nullptr;
    return c10::DataPtr(nullptr, c10::Device(kNeuron, device));
  }
  void* h = cur.get();
  if (is_redirected(cur)) {
    auto old = hs->set_data_ptr(c10::DataPtr(h, c10::Device(c10::DeviceType::CPU)));
    old.release_context();
    *alias = h;
    return adopt_raw(nsimHostToDeviceUnchecked(h), device);
  }
  // A kernel returned memory it did not allocate through the CPU allocator
  // (another thread's or a static buffer): copy it into device memory.
  void* d = raw_alloc(device, n, /*scratch=*/false);
  void* ah = nsimDeviceToHostUnchecked(d);
  std::memcpy(ah, h, n);
  auto old = hs->set_data_ptr(c10::DataPtr(ah, c10::Device(c10::DeviceType::CPU)));
  *alias = ah;
  return adopt_raw(d, device);
}

}  // namespace

HostScope::HostScope(c10::DeviceIndex device) : device_(usable(device)), exec_(device) {}

c10::Storage HostScope::host_storage_for(const c10::Storage& ds) {
  auto* impl = ds.unsafeGetStorageImpl();
  for (auto& p : storages_) {
    if (p.device == impl) return p.host;
  }
  void* dptr = const_cast<void*>(impl->data_ptr().get());
  void* h = dptr ? nsimDeviceToHostUnchecked(dptr) : nullptr;
  TORCH_INTERNAL_ASSERT(!dptr || h, "neuron: storage pointer ", dptr, " is not device memory");
  c10::Storage hs(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      c10::DataPtr(h, c10::Device(c10::DeviceType::CPU)), host_alias_allocator(), impl->resizable()));
  storages_.push_back(StoragePair{impl, c10::Storage(), hs, h, impl->nbytes()});
  return hs;
}
void HostScope::sync_storage(StoragePair& p) {
  auto* hs = p.host.unsafeGetStorageImpl();
  if (hs->data_ptr().get() == p.host_ptr && hs->nbytes() == p.nbytes) return;
  void* alias = nullptr;
  c10::DataPtr dev = take_into_device(hs, device_, &alias);
  p.device->set_data_ptr_noswap(std::move(dev));
  p.device->set_nbytes(hs->nbytes());
  p.host_ptr = alias;
  p.nbytes = hs->nbytes();
}

at::Tensor host_alias_of(const at::Tensor& t) {
  if (!is_neuron(t)) return t;
  TORCH_CHECK(!HostScope::has_layout_parts(t), "neuron: a host alias of a ", t.layout(),
              t.is_quantized() ? " quantized" : "", " tensor needs its parts; alias a strided tensor");
  auto* impl = t.storage().unsafeGetStorageImpl();
  void* dptr = const_cast<void*>(impl->data_ptr().get());
  void* h = dptr ? nsimDeviceToHostUnchecked(dptr) : nullptr;
  TORCH_CHECK(!dptr || h, "neuron: storage pointer ", dptr, " is not device memory");
  c10::Storage hs(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      c10::DataPtr(h, c10::Device(c10::DeviceType::CPU)), host_alias_allocator(), /*resizable=*/false));
  auto a = at::detail::make_tensor<c10::TensorImpl>(
      std::move(hs), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  a.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) a._set_conj(true);
  if (t.is_neg()) a._set_neg(true);
  return a;
}

at::Tensor HostScope::alias(const at::Tensor& t) {
  if (!is_neuron(t)) return t;
  if (C10_UNLIKELY(valueless::any()) && valueless::contains(t)) read_valueless_ = true;
  for (auto& tp : tensors_) {
    if (tp.device == t.unsafeGetTensorImpl()) return tp.host;
  }
  if (C10_UNLIKELY(has_layout_parts(t))) return alias_layout(t);
  c10::Storage hs = host_storage_for(t.storage());
  auto h = at::detail::make_tensor<c10::TensorImpl>(
      std::move(hs), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  h.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) h._set_conj(true);
  if (t.is_neg()) h._set_neg(true);
  tensors_.push_back(TensorPair{t.unsafeGetTensorImpl(), h});
  return h;
}

c10::StorageImpl* HostScope::device_storage_of(const c10::Storage& host) {
  auto* hs = host.unsafeGetStorageImpl();
  for (auto& p : storages_) {
    if (p.host.unsafeGetStorageImpl() == hs) {
      sync_storage(p);
      return p.device;
    }
  }
  // Memory the kernel allocated (a fresh result, or an argument re-pointed
  // set_-style): the device takes it over.
  void* alias = nullptr;
  c10::DataPtr dev = take_into_device(hs, device_, &alias);
  c10::Storage ds(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), hs->nbytes(), std::move(dev), device_allocator(),
      /*resizable=*/true));
  c10::StorageImpl* impl = ds.unsafeGetStorageImpl();
  storages_.push_back(StoragePair{impl, std::move(ds), host, alias, hs->nbytes()});
  return impl;
}

at::Tensor HostScope::result(const at::Tensor& host) {
  if (!host.defined() || host.device().type() != c10::DeviceType::CPU) return host;
  if (C10_UNLIKELY(host.layout() != c10::kStrided)) return result_layout(host);
  for (auto& tp : tensors_) {
    if (tp.host.unsafeGetTensorImpl() == host.unsafeGetTensorImpl()) {
      for (auto& p : storages_) sync_storage(p);
      sync_pair(tp);
      return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(tp.device));
    }
  }
  if (C10_UNLIKELY(host.is_quantized())) return result_layout(host);
  c10::Storage ds(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_storage_of(host.storage())));
  // The full constructor adds the autograd and autocast keys (outside inference mode).
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(ds), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), host.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(host.sizes(), host.strides(),
                                                  host.storage_offset());
  if (host.is_conj()) t._set_conj(true);
  if (host.is_neg()) t._set_neg(true);
  // Efficient zero tensors (_efficientzerotensor) have no memory; the key says so.
  if (host._is_zerotensor()) t.unsafeGetTensorImpl()->_set_zero(true);
  if (C10_UNLIKELY(read_valueless_)) valueless::mark(t);
  return t;
}

void HostScope::sync_all() {
  for (auto& p : storages_) sync_storage(p);
  for (auto& tp : tensors_) sync_pair(tp);
  for (auto& lp : layouts_) sync_layout(lp);
}

void HostScope::sync_mutated(const at::Tensor& device_tensor) {
  for (auto& p : storages_) sync_storage(p);
  for (auto& tp : tensors_) {
    if (tp.device == device_tensor.unsafeGetTensorImpl()) sync_pair(tp);
  }
}

void HostScope::sync_pair(TensorPair& tp) {
  {
    auto* hi = tp.host.unsafeGetTensorImpl();
    auto* di = tp.device;
    c10::StorageImpl* ds = device_storage_of(hi->storage());
    if (ds != di->storage().unsafeGetStorageImpl()) {
      di->set_storage_keep_dtype(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(ds)));
    }
    if (hi->sizes() != di->sizes() || hi->strides() != di->strides() ||
        hi->storage_offset() != di->storage_offset()) {
      di->set_sizes_and_strides(hi->sizes(), hi->strides(), hi->storage_offset());
    }
  }
}

}  // namespace torch_neuron
