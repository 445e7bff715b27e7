// Host forms of sparse (COO, compressed) and quantized neuron tensors.
//
// A sparse tensor is a few dense tensors (indices, values) and metadata; its host form is a
// SparseCPU / SparseCsrCPU tensor over host aliases of those dense parts, so the CPU kernel
// reads and writes device memory as for dense tensors. A quantized tensor is dense storage
// plus a quantizer; its host form is a QuantizedCPU tensor over the aliased storage, with the
// per-channel scales and zero points aliased too. Results map back part by part, so nothing
// a sparse or quantized op returns is a CPU tensor.
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/DeviceGuard.h>

#include "aten/HostScope.h"

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

at::SparseTensorImpl* coo(const at::Tensor& t) { return static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl()); }
at::SparseCsrTensorImpl* compressed(const at::Tensor& t) {
  return static_cast<at::SparseCsrTensorImpl*>(t.unsafeGetTensorImpl());
}

bool is_compressed(const at::Tensor& t) {
  const auto l = t.layout();
  return l == c10::kSparseCsr || l == c10::kSparseCsc || l == c10::kSparseBsr || l == c10::kSparseBsc;
}

// The quantizer with its tensors (per-channel scales and zero points) mapped by `map`.
template <typename Map>
at::QuantizerPtr map_quantizer(const at::QuantizerPtr& q, const char* where, Map&& map) {
  switch (q->qscheme()) {
    case c10::kPerTensorAffine:
    case c10::kPerTensorSymmetric:
      return q;  // scale and zero point are numbers
    case c10::kPerChannelAffine:
    case c10::kPerChannelSymmetric: {
      auto* pc = static_cast<at::PerChannelAffineQuantizer*>(q.get());
      return c10::make_intrusive<at::PerChannelAffineQuantizer>(pc->scalar_type(), map(pc->scales()),
                                                                map(pc->zero_points()), pc->axis());
    }
    case c10::kPerChannelAffineFloatQParams: {
      auto* pc = static_cast<at::PerChannelAffineFloatQParamsQuantizer*>(q.get());
      return c10::make_intrusive<at::PerChannelAffineFloatQParamsQuantizer>(pc->scalar_type(), map(pc->scales()),
                                                                            map(pc->zero_points()), pc->axis());
    }
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: quantized tensors with qscheme ", c10::toString(q->qscheme()),
                                  " have no host form (", where, "); per-tensor and per-channel affine are supported");
  }
}

}  // namespace

at::Tensor HostScope::alias_layout(const at::Tensor& t) {
  auto* impl = t.unsafeGetTensorImpl();
  if (t.is_quantized() && t.layout() == c10::kStrided) {
    auto* q = static_cast<at::QTensorImpl*>(impl);
    auto hq = map_quantizer(q->quantizer(), "argument", [this](const at::Tensor& p) { return alias(p); });
    const void* given = hq.get();
    auto h = at::detail::make_tensor<at::QTensorImpl>(host_storage_for(t.storage()),
                                                      c10::DispatchKeySet(c10::DispatchKey::QuantizedCPU), t.dtype(),
                                                      std::move(hq));
    h.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    tensors_.push_back(TensorPair{impl, h});
    layouts_.push_back(LayoutPair{impl, h, given});  // for a quantizer the kernel replaces (copy_, set_)
    return h;
  }
  for (auto& lp : layouts_) {
    if (lp.device == impl) return lp.host;
  }
  at::Tensor h;
  if (t.is_sparse()) {
    auto* d = coo(t);
    h = at::detail::make_tensor<at::SparseTensorImpl>(c10::DispatchKeySet(c10::DispatchKey::SparseCPU), t.dtype());
    auto* hi = coo(h);
    hi->raw_resize_(d->sparse_dim(), d->dense_dim(), t.sizes());
    hi->set_indices_and_values_unsafe(alias(d->indices()), alias(d->values()));
    hi->set_coalesced(d->coalesced());
  } else if (is_compressed(t)) {
    auto* d = compressed(t);
    h = at::detail::make_tensor<at::SparseCsrTensorImpl>(c10::DispatchKeySet(c10::DispatchKey::SparseCsrCPU),
                                                         c10::Device(c10::DeviceType::CPU), t.layout(), t.dtype());
    compressed(h)->set_member_tensors(alias(d->compressed_indices()), alias(d->plain_indices()),
                                      alias(d->values()), t.sizes());
  } else {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: tensors of layout ", t.layout(),
                                " have no host form; neuron supports strided, sparse COO, compressed sparse "
                                "(CSR, CSC, BSR, BSC) and quantized tensors");
  }
  layouts_.push_back(LayoutPair{impl, h});
  return h;
}

at::Tensor HostScope::result_layout(const at::Tensor& host) {
  auto* hi = host.unsafeGetTensorImpl();
  if (host.is_quantized() && host.layout() == c10::kStrided) {
    // Not an alias of an argument (those map back through tensors_): a view or fresh memory.
    auto* q = static_cast<at::QTensorImpl*>(hi);
    auto dq = map_quantizer(q->quantizer(), "result", [this](const at::Tensor& p) { return result(p); });
    c10::Storage ds(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(device_storage_of(host.storage())));
    auto t = at::detail::make_tensor<at::QTensorImpl>(std::move(ds),
                                                      c10::DispatchKeySet(c10::DispatchKey::QuantizedPrivateUse1),
                                                      host.dtype(), std::move(dq));
    t.unsafeGetTensorImpl()->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
    return t;
  }
  for (auto& lp : layouts_) {
    if (lp.host.unsafeGetTensorImpl() == hi) {
      sync_layout(lp);
      return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(lp.device));
    }
  }
  // The sparse impls take their device from the current one.
  c10::DeviceGuard guard(c10::Device(kNeuron, device_));
  if (host.is_sparse()) {
    auto* h = coo(host);
    at::Tensor indices = result(h->indices()), values = result(h->values());
    auto t = at::detail::make_tensor<at::SparseTensorImpl>(
        c10::DispatchKeySet(c10::DispatchKey::SparsePrivateUse1), host.dtype());
    coo(t)->raw_resize_(h->sparse_dim(), h->dense_dim(), host.sizes());
    coo(t)->set_indices_and_values_unsafe(indices, values);
    coo(t)->set_coalesced(h->coalesced());
    return t;
  }
  if (is_compressed(host)) {
    auto* h = compressed(host);
    auto t = at::detail::make_tensor<at::SparseCsrTensorImpl>(
        c10::DispatchKeySet(c10::DispatchKey::SparseCsrPrivateUse1), c10::Device(kNeuron, device_), host.layout(),
        host.dtype());
    compressed(t)->set_member_tensors(result(h->compressed_indices()), result(h->plain_indices()),
                                      result(h->values()), host.sizes());
    return t;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: a host kernel returned a tensor of layout ", host.layout(),
                              ", which has no neuron form");
}

void HostScope::sync_layout(LayoutPair& lp) {
  // In-place sparse kernels (add_, zero_, resize_as_, copy_, coalesce's _coalesced_) replace
  // the parts or metadata of the host form; the device form takes them over.
  const at::Tensor& host = lp.host;
  if (host.is_quantized()) {
    auto* h = static_cast<at::QTensorImpl*>(host.unsafeGetTensorImpl());
    if (h->quantizer().get() != lp.host_quantizer) {
      auto dq = map_quantizer(h->quantizer(), "argument", [this](const at::Tensor& p) { return result(p); });
      static_cast<at::QTensorImpl*>(lp.device)->set_quantizer_(dq);
      lp.host_quantizer = h->quantizer().get();
    }
    return;
  }
  c10::DeviceGuard guard(c10::Device(kNeuron, device_));
  if (host.is_sparse()) {
    auto* h = coo(host);
    auto* d = static_cast<at::SparseTensorImpl*>(lp.device);
    at::Tensor indices = result(h->indices()), values = result(h->values());
    if (d->sizes() != h->sizes() || d->sparse_dim() != h->sparse_dim() || d->dense_dim() != h->dense_dim()) {
      d->raw_resize_(h->sparse_dim(), h->dense_dim(), h->sizes());
    }
    if (!d->indices().is_same(indices) || !d->values().is_same(values)) {
      d->set_indices_and_values_unsafe(indices, values);
    }
    d->set_coalesced(h->coalesced());
  } else {
    auto* h = compressed(host);
    auto* d = static_cast<at::SparseCsrTensorImpl*>(lp.device);
    at::Tensor ci = result(h->compressed_indices()), pi = result(h->plain_indices()), v = result(h->values());
    if (!d->compressed_indices().is_same(ci) || !d->plain_indices().is_same(pi) || !d->values().is_same(v) ||
        d->sizes() != h->sizes()) {
      d->set_member_tensors(ci, pi, v, h->sizes());
    }
  }
}

}  // namespace torch_neuron
