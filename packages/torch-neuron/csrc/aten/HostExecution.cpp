#include "aten/HostExecution.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <memory>

#include "aten/OpAccounting.h"
#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"

#include <cstring>

namespace torch_neuron {
namespace {

constexpr auto kNeuron = c10::DeviceType::PrivateUse1;
thread_local c10::DeviceIndex t_exec_device = -1;

// Host memory handed to CPU kernels during host execution: the host alias of a
// device block. data == context == alias, so raw_allocate/raw_deallocate work.
void redirect_free(void* host_alias) {
  if (host_alias) raw_free(nsimHostToDeviceUnchecked(host_alias));
}

struct RedirectAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex d = t_exec_device;
    TORCH_INTERNAL_ASSERT(d >= 0, "neuron: device-backed host allocation outside host execution");
    if (n == 0) return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    void* h = nsimDeviceToHostUnchecked(raw_alloc(d, n));
    return c10::DataPtr(h, h, &redirect_free, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &redirect_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};
RedirectAllocator g_redirect;

c10::DeleterFnPtr g_base_raw_deleter = nullptr;

// raw_deallocate of memory from raw_allocate: the pointer says which allocator
// served it (host execution may have redirected the allocation).
void interposed_raw_free(void* p) {
  if (p && nsimHostToDeviceUnchecked(p)) {
    redirect_free(p);
  } else if (g_base_raw_deleter) {
    g_base_raw_deleter(p);
  }
}

// Replaces the process CPU allocator: while a host execution runs on this
// thread, CPU tensors (the kernel's outputs and scratch) come from device memory.
struct InterposingCPUAllocator final : public c10::Allocator {
  c10::Allocator* base = nullptr;
  c10::DataPtr allocate(size_t n) override {
    if (t_exec_device >= 0) return g_redirect.allocate(n);
    return base->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &interposed_raw_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base->copy_data(dest, src, count);
  }
};
InterposingCPUAllocator g_interposer;

bool is_neuron(const at::Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

bool is_optional_generator(const c10::TypePtr& ty) {
  return ty->kind() == c10::TypeKind::OptionalType &&
         ty->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

c10::ScalarType first_dtype(c10::ScalarType cur, const at::Tensor& t) {
  return cur == c10::ScalarType::Undefined ? t.scalar_type() : cur;
}

double nbytes_of(const at::Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel()) * t.element_size() : 0.0;
}

[[noreturn]] void device_mismatch(const OpInfo& info, const std::string& a, const std::string& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
              a, " and ", b, "! (when running ", info.name, " on neuron)");
}

}  // namespace

void install_host_allocation_redirect() {
  static bool installed = [] {
    g_interposer.base = c10::GetCPUAllocator();
    g_base_raw_deleter = g_interposer.base->raw_deleter();
    c10::SetCPUAllocator(&g_interposer, /*priority=*/1);
    return true;
  }();
  (void)installed;
}

HostScope::HostScope(c10::DeviceIndex device) : device_(device), prev_exec_device_(t_exec_device) {
  // Host aliases reach device memory without a runtime call: a forked child stops here.
  if (C10_UNLIKELY(in_bad_fork())) ensure_initialized();
  t_exec_device = device;
}

HostScope::~HostScope() { t_exec_device = prev_exec_device_; }

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
      c10::DataPtr(h, c10::Device(c10::DeviceType::CPU)), &g_redirect, impl->resizable()));
  storages_.push_back(StoragePair{impl, c10::Storage(), hs, h, impl->nbytes()});
  return hs;
}

// Moves the memory behind a host storage into device ownership. The host
// storage keeps a non-owning alias so host tensors stay valid in this scope.
static c10::DataPtr take_into_device(c10::StorageImpl* hs, c10::DeviceIndex device, void** alias) {
  const size_t n = hs->nbytes();
  const c10::DataPtr& cur = hs->data_ptr();
  if (n == 0 || cur.get() == nullptr) {
    *alias = nullptr;
    return c10::DataPtr(nullptr, c10::Device(kNeuron, device));
  }
  void* h = cur.get();
  if (cur.get_deleter() == &redirect_free) {
    auto old = hs->set_data_ptr(c10::DataPtr(h, c10::Device(c10::DeviceType::CPU)));
    old.release_context();
    *alias = h;
    return adopt_raw(nsimHostToDeviceUnchecked(h), device);
  }
  // A kernel returned memory it did not allocate through the CPU allocator
  // (another thread's or a static buffer): copy it into device memory.
  void* d = raw_alloc(device, n);
  void* ah = nsimDeviceToHostUnchecked(d);
  std::memcpy(ah, h, n);
  auto old = hs->set_data_ptr(c10::DataPtr(ah, c10::Device(c10::DeviceType::CPU)));
  *alias = ah;
  return adopt_raw(d, device);
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

at::Tensor HostScope::alias(const at::Tensor& t) {
  if (!is_neuron(t)) return t;
  for (auto& tp : tensors_) {
    if (tp.device == t.unsafeGetTensorImpl()) return tp.host;
  }
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
  for (auto& tp : tensors_) {
    if (tp.host.unsafeGetTensorImpl() == host.unsafeGetTensorImpl()) {
      for (auto& p : storages_) sync_storage(p);
      sync_pair(tp);
      return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(tp.device));
    }
  }
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
  return t;
}

void HostScope::sync_all() {
  for (auto& p : storages_) sync_storage(p);
  for (auto& tp : tensors_) sync_pair(tp);
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

void host_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t nargs = args.size();
  const size_t first = stack->size() - nargs;
  OpInfo& info = op_info(op);

  // Pass 1: the execution device, dtype and device consistency.
  c10::DeviceIndex device = -1;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  const at::Tensor* cpu_tensor = nullptr;
  const at::Tensor* cpu_out = nullptr;
  const bool maybe_native = !info.native_entry.empty();
  bool is_out_arg = false;  // out= tensors are results, not operands of the kernel
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    if (t.device().type() == kNeuron) {
      if (device < 0) {
        device = t.device().index();
      } else if (t.device().index() != device) {
        device_mismatch(info, c10::Device(kNeuron, device).str(), t.device().str());
      }
      dtype = first_dtype(dtype, t);
    } else if (t.device().is_cpu() && is_out_arg && !cpu_out) {
      cpu_out = &t;
    } else if (t.device().is_cpu() && t.dim() > 0 && !cpu_tensor) {
      cpu_tensor = &t;
    }
  };
  c10::DeviceIndex device_arg = -1;
  for (size_t i = first; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    const auto* ai = args[i - first].alias_info();
    is_out_arg = ai && ai->isWrite() && args[i - first].kwarg_only();
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) visit(e.toTensor());
      }
    } else if (v.isDevice() && v.toDevice().type() == kNeuron) {
      device_arg = v.toDevice().has_index() ? v.toDevice().index() : current_device();
    }
  }
  if (device < 0) device = device_arg;
  if (device < 0) {
    // No neuron tensor or device: the op reached the backend through a neuron
    // generator alone; the CPU kernel reports the mismatch as it would for CUDA.
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  TORCH_CHECK(!cpu_out, "Expected out tensor to have device ", c10::Device(kNeuron, device),
              ", but got cpu instead (when running ", info.name, " on neuron)");
  if (cpu_tensor && !info.accepts_cpu_tensors && !info.is_view) {
    device_mismatch(info, c10::Device(kNeuron, device).str(), "cpu");
  }
  check_device_index(device);
  CostInputs cost;
  if (maybe_native) {
    decide_native(info, dtype, c10::ArrayRef<c10::IValue>(stack->data() + first, nargs), cost);
  }
  if (!info.is_view && !cost.native) on_fallback(info, dtype);

  // Pass 2: replace arguments by their host forms. The replaced device arguments stay
  // owned here (moved, so without reference-count traffic): the scope borrows them.
  c10::SmallVector<c10::IValue, 8> originals;
  HostScope scope(device);
  cost.low_precision = dtype == c10::ScalarType::BFloat16 || dtype == c10::ScalarType::Half ||
                       dtype == c10::ScalarType::Float8_e4m3fn || dtype == c10::ScalarType::Float8_e5m2;
  double matrix_k = 0, weight_per_out = 0;
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (v.isTensor()) {
      if (!is_neuron(v.toTensor())) continue;
      originals.push_back(std::move(v));
      const at::Tensor& t = originals.back().toTensor();
      cost.bytes_in += nbytes_of(t);
      if (info.cls == OpClass::Matmul && static_cast<int>(i) == info.matrix_arg && t.dim() > 0) {
        matrix_k = static_cast<double>(t.size(-1));
      }
      if (info.cls == OpClass::Convolution && i == 1 && t.dim() > 0 && t.size(0) > 0) {
        weight_per_out = static_cast<double>(t.numel() / t.size(0));
      }
      v = scope.alias(t);
    } else if (v.isTensorList()) {
      originals.push_back(v);
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        cost.bytes_in += is_neuron(t) ? nbytes_of(t) : 0.0;
        out.push_back(scope.alias(t));
      }
      v = std::move(out);
    } else if (v.isList() && args[i].type()->kind() == c10::TypeKind::ListType) {
      bool any = false;
      for (const c10::IValue& e : v.toListRef()) any = any || (e.isTensor() && is_neuron(e.toTensor()));
      if (!any) continue;
      originals.push_back(v);
      c10::List<std::optional<at::Tensor>> out;
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) {
          cost.bytes_in += nbytes_of(e.toTensor());
          out.push_back(scope.alias(e.toTensor()));
        } else {
          out.push_back(std::nullopt);
        }
      }
      v = std::move(out);
    } else if (v.isDevice()) {
      if (v.toDevice().type() == kNeuron) v = c10::Device(c10::DeviceType::CPU);
    } else if (v.isGenerator() || (v.isNone() && is_optional_generator(args[i].type()))) {
      // A CPU kernel would draw from a CPU generator: values would not follow the neuron
      // generator's (seed, offset) counters. Every random op has a kernel in RandomKernels.cpp.
      TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", info.name,
                                  " draws random numbers and has no neuron random kernel");
    }
  }

  // Device numerics: the tile kernel recomputes a native call's values (see OpAccounting.h).
  const NativeExecutor numerics = cost.native ? native_executor() : nullptr;
  std::vector<c10::IValue> numerics_args, numerics_inputs;
  if (C10_UNLIKELY(numerics != nullptr)) {
    numerics_args.assign(stack->begin() + first, stack->end());
    numerics_inputs = native_inputs(schema, numerics_args);
  }

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  // Arguments the kernel mutated may have been resized or re-pointed.
  scope.sync_all();
  const size_t nret = schema.returns().size();
  const size_t rfirst = stack->size() - nret;
  if (C10_UNLIKELY(numerics != nullptr)) {
    numerics(info, dtype, numerics_inputs, numerics_args,
             c10::ArrayRef<c10::IValue>(stack->data() + rfirst, nret));
  }
  double out_numel = 0;
  for (size_t j = rfirst; j < stack->size(); ++j) {
    c10::IValue& v = (*stack)[j];
    if (v.isTensor()) {
      at::Tensor r = scope.result(v.toTensor());
      if (r.defined()) {
        cost.bytes_out += nbytes_of(r);
        out_numel += static_cast<double>(r.numel());
      }
      v = std::move(r);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        at::Tensor r = scope.result(t);
        cost.bytes_out += nbytes_of(r);
        out_numel += r.defined() ? static_cast<double>(r.numel()) : 0.0;
        out.push_back(std::move(r));
      }
      v = std::move(out);
    }
  }
  if (info.is_view) return;
  switch (info.cls) {
    case OpClass::Matmul:
      cost.flops = 2.0 * out_numel * matrix_k;
      break;
    case OpClass::Convolution:
      cost.flops = 2.0 * out_numel * weight_per_out;
      break;
    default:
      cost.flops = std::max(out_numel, cost.bytes_in / std::max<double>(1.0, c10::elementSize(
                                           dtype == c10::ScalarType::Undefined ? c10::ScalarType::Float : dtype)));
  }
  account(info, device, dtype, /*native=*/false, cost);
}

}  // namespace torch_neuron

namespace torch_neuron {
void account_host_kernel(const char* op_name, c10::DeviceIndex device, c10::ScalarType dtype,
                         double flops, double bytes_in, double bytes_out) {
  OpInfo& info = op_info_by_name(op_name);
  CostInputs cost;
  cost.flops = flops;
  cost.bytes_in = bytes_in;
  cost.bytes_out = bytes_out;
  cost.low_precision = dtype == c10::ScalarType::BFloat16 || dtype == c10::ScalarType::Half;
  account(info, device, dtype, /*native=*/false, cost);
}
}  // namespace torch_neuron

namespace torch_neuron {
size_t register_functional_host_kernels() {
  static size_t count = [] {
    auto& dispatcher = c10::Dispatcher::singleton();
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                          __FILE__, __LINE__);
    size_t n = 0;
    for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
      // Foreach ops: one host execution (one launch) for the whole tensor list, as a
      // fused multi-tensor kernel would be, instead of one op per tensor.
      const bool foreach = name.name.rfind("aten::_foreach_", 0) == 0 &&
                           op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
      const bool structured_functional =
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
          op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
      // Ops with both a CPU kernel and a composite one for other backends (native_layer_norm
      // decomposes into batch_norm, native_group_norm, addr, ...): run CPU's kernel.
      const bool cpu_over_composite =
          op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
          op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
      if (!foreach && !structured_functional && !cpu_over_composite) continue;
      std::string short_name = name.name.substr(6);
      if (!name.overload_name.empty()) short_name += "." + name.overload_name;
      lib->impl(short_name.c_str(), torch::CppFunction::makeFromBoxedFunction<&host_fallback>());
      ++n;
    }
    return n;
  }();
  return count;
}
}  // namespace torch_neuron
