// The sparse and quantized dispatch keys of `neuron` (SparsePrivateUse1, SparseCsrPrivateUse1,
// QuantizedPrivateUse1), as CUDA has SparseCUDA, SparseCsrCUDA and QuantizedCUDA.
//
// Constructors, metadata reads and views are torch's device-generic kernels, registered as
// CUDA registers them. Every other op runs its SparseCPU / SparseCsrCPU / QuantizedCPU kernel
// by host execution over the tensors' host forms (HostLayouts.cpp), and is counted as a
// fallback like any other host execution.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "aten/Accounting.h"
#include "aten/CostInputs.h"
#include "aten/HostFallback.h"
#include "aten/HostScope.h"

namespace torch_neuron {
namespace {

struct LayoutKey {
  c10::DispatchKey neuron;
  c10::DispatchKey cpu;
  const char* name;  // as torch's errors name neuron's key
};
constexpr LayoutKey kLayoutKeys[] = {
    {c10::DispatchKey::SparsePrivateUse1, c10::DispatchKey::SparseCPU, "Sparseneuron"},
    {c10::DispatchKey::SparseCsrPrivateUse1, c10::DispatchKey::SparseCsrCPU, "SparseCsrneuron"},
    {c10::DispatchKey::QuantizedPrivateUse1, c10::DispatchKey::QuantizedCPU, "Quantizedneuron"},
};

template <int I>
void layout_host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  constexpr LayoutKey key = kLayoutKeys[I];
  // Checked here so the error names neuron's key rather than the CPU one it redispatches to.
  TORCH_CHECK_NOT_IMPLEMENTED(op.hasKernelForDispatchKey(key.cpu), "Could not run '", op.schema().operator_name(),
                              "' with arguments from the '", key.name, "' backend: CPU has no ",
                              c10::toString(key.cpu), " kernel for it either, which neuron's host execution of ",
                              "sparse and quantized tensors runs. Convert to a dense tensor first (to_dense(), ",
                              "dequantize()).");
  host_fallback_as(op, stack, key.cpu);
}

}  // namespace

namespace {

// Ops with a CPU kernel for the layout and a composite kernel other backends get (structured
// ops' functional forms, ops that decompose): the composite would allocate strided outputs, so
// the CPU kernel runs by host execution instead, as for dense ops.
template <int I>
size_t register_over_composites() {
  constexpr LayoutKey key = kLayoutKeys[I];
  auto& dispatcher = c10::Dispatcher::singleton();
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", key.neuron, __FILE__, __LINE__);
  size_t n = 0;
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || op->hasKernelForDispatchKey(key.neuron) || !op->hasKernelForDispatchKey(key.cpu)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
      continue;  // the key's fallback serves it
    }
    // Factories such as empty_quantized(size, qtensor, device=...): the composite dispatches the
    // allocation by its options, so an output asked for on another device lands there.
    bool takes_device = false;
    for (const auto& a : op->schema().arguments()) takes_device = takes_device || a.name() == "device";
    if (takes_device) continue;
    std::string short_name = name.name.substr(6);
    if (!name.overload_name.empty()) short_name += "." + name.overload_name;
    lib->impl(short_name.c_str(), torch::CppFunction::makeFromBoxedFunction<&layout_host_fallback<I>>());
    ++n;
  }
  return n;
}

// Copies to, from and between quantized neuron tensors: CPU's copy (which handles quantized
// sources and destinations, and takes over the source's quantizer) on the host forms.
at::Tensor quantized_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& on_device = self.device().type() == c10::DeviceType::PrivateUse1 ? self : dst;
  HostScope scope(on_device.device().index());
  at::Tensor hd = scope.alias(dst);
  hd.copy_(scope.alias(self));
  scope.sync_all();
  account_host_kernel("aten::_copy_from", on_device.device().index(), on_device.scalar_type(),
                      double(self.numel()), nbytes(self), nbytes(dst));
  return dst;
}

}  // namespace

size_t register_layout_host_kernels() {
  static size_t count = register_over_composites<0>() + register_over_composites<1>() + register_over_composites<2>();
  return count;
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_host_fallback<0>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_host_fallback<1>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&layout_host_fallback<2>>());
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", TORCH_FN(at::native::empty_affine_quantized));
  m.impl("_empty_per_channel_affine_quantized", TORCH_FN(at::native::empty_per_channel_affine_quantized));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_unknown_quantized));
  m.impl("empty_strided", TORCH_FN(at::native::empty_strided_unknown_quantized));
  m.impl("empty_quantized", TORCH_FN(at::native::empty_quantized));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_quantized));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_qtensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("q_scale", TORCH_FN(at::native::q_scale_quant));
  m.impl("q_zero_point", TORCH_FN(at::native::q_zero_point_quant));
  m.impl("qscheme", TORCH_FN(at::native::qscheme_quant));
  m.impl("q_per_channel_axis", TORCH_FN(at::native::q_per_channel_axis));
  m.impl("_copy_from", TORCH_FN(quantized_copy_from));
}

}  // namespace torch_neuron
