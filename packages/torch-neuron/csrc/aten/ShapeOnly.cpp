#include "aten/ShapeOnly.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index.h>
#include <ATen/ops/zeros.h>
#include <c10/core/StorageImpl.h>

#include "aten/Accounting.h"
#include "aten/HostFallback.h"
#include "aten/HostScope.h"
#include "runtime/NeuronAllocator.h"
#include "runtime/NeuronStorage.h"

namespace torch_neuron::shape_only {

std::atomic<bool> g_active{false};

namespace {

std::atomic<ReadReporter> g_reader{nullptr};

constexpr auto kMeta = c10::DeviceType::Meta;

bool is_out_arg(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite() && a.kwarg_only(); }
bool writes(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

template <typename F>
void each_neuron_tensor(const c10::IValue& v, F f) {
  if (v.isTensor()) {
    if (is_neuron_tensor(v.toTensor())) f(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (is_neuron_tensor(t)) f(t);
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && is_neuron_tensor(e.toTensor())) f(e.toTensor());
    }
  }
}

at::Tensor meta_like(const at::Tensor& t, c10::Storage storage) {
  auto m = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::Meta),
                                                    t.dtype());
  m.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) m._set_conj(true);
  if (t.is_neg()) m._set_neg(true);
  return m;
}

c10::Storage meta_storage(size_t nbytes) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                            c10::DataPtr(nullptr, c10::Device(kMeta)),
                                                            c10::GetAllocator(kMeta), /*resizable=*/true));
}

// What an op whose result sizes depend on its operands' values returns when an operand has no
// values: the upper bound of each size, or the exact size when the deciding operand (a mask)
// has values. Fills `out` with meta results; false for other ops.
bool data_dependent_results(const OpInfo& info, c10::ArrayRef<c10::IValue> args, MetaScope& scope,
                            std::vector<c10::IValue>& out) {
  const std::string& n = info.name;
  auto long_meta = [](c10::IntArrayRef sizes) {
    return at::empty(sizes, at::TensorOptions().dtype(at::kLong).device(kMeta));
  };
  // True elements of a mask: counted on the host when it has values, else all of them.
  auto selected = [](const at::Tensor& mask) -> int64_t {
    if (!is_neuron_tensor(mask) || valueless::contains(mask)) return mask.numel();
    return host_alias_of(mask).count_nonzero().item<int64_t>();
  };
  if (n == "aten::nonzero") {
    const at::Tensor& self = args[0].toTensor();
    out.emplace_back(long_meta({self.numel(), self.dim()}));
    return true;
  }
  if (n == "aten::masked_select") {
    const at::Tensor& self = args[0].toTensor();
    const at::Tensor& mask = args[1].toTensor();
    const auto shape = at::infer_size(self.sizes(), mask.sizes());
    int64_t total = 1;
    for (int64_t s : shape) total *= s;
    const int64_t per = mask.numel() > 0 ? total / mask.numel() : 0;
    out.emplace_back(at::empty({per * selected(mask)}, at::TensorOptions().dtype(self.scalar_type()).device(kMeta)));
    return true;
  }
  if (n == "aten::_unique2" || n == "aten::unique_consecutive") {
    const at::Tensor& self = args[0].toTensor();
    const bool inverse = args[n == "aten::_unique2" ? 2 : 1].toBool();
    const bool counts = args[n == "aten::_unique2" ? 3 : 2].toBool();
    if (n == "aten::unique_consecutive" && !args[3].isNone()) return false;
    out.emplace_back(at::empty({self.numel()}, at::TensorOptions().dtype(self.scalar_type()).device(kMeta)));
    out.emplace_back(inverse ? long_meta(self.sizes()) : long_meta({0}));
    out.emplace_back(counts ? long_meta({self.numel()}) : long_meta({0}));
    return true;
  }
  if (n == "aten::index.Tensor") {
    // A boolean mask index of k dims is k long indices of its true elements.
    c10::List<std::optional<at::Tensor>> indices;
    bool any_mask = false;
    for (const c10::IValue& e : args[1].toListRef()) {
      if (!e.isTensor()) {
        indices.push_back(std::nullopt);
        continue;
      }
      const at::Tensor& i = e.toTensor();
      if (i.scalar_type() == at::kBool || i.scalar_type() == at::kByte) {
        any_mask = true;
        const int64_t k = selected(i);
        for (int64_t d = 0; d < i.dim(); ++d) indices.push_back(long_meta({k}));
      } else {
        indices.push_back(scope.alias(i));
      }
    }
    if (!any_mask) return false;
    out.emplace_back(at::index(scope.alias(args[0].toTensor()), indices));
    return true;
  }
  return false;
}

// The op's first neuron tensor without values, for the error of an op that cannot run without.
std::string valueless_operand(c10::ArrayRef<c10::IValue> args, const c10::FunctionSchema& schema) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string found;
    each_neuron_tensor(args[i], [&](const at::Tensor& t) {
      if (found.empty() && valueless::contains(t)) {
        std::ostringstream os;
        os << "'" << schema.arguments()[i].name() << "' (" << t.sizes() << ", " << t.scalar_type() << ")";
        found = os.str();
      }
    });
    if (!found.empty()) return found;
  }
  return "?";
}

// Ops whose results hold no tensor (equal, is_nonzero, ...): their answer is the host's answer
// for zeros, and the host read of the valueless operand is reported.
void run_on_zeros(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpInfo& info, c10::DeviceIndex device,
                  c10::ScalarType dtype, CostInputs& cost) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t first = stack->size() - nargs;
  HostScope scope(device);
  at::Tensor read;
  auto form = [&](const at::Tensor& t) -> at::Tensor {
    if (!is_neuron_tensor(t)) return t;
    cost.bytes_in += nbytes(t);
    if (!valueless::contains(t)) return scope.alias(t);
    if (!read.defined()) read = t;
    const c10::Scalar fill = valueless::fill_of(t).value_or(c10::Scalar(0));
    return at::full({}, fill, t.options().device(c10::kCPU)).expand(t.sizes());
  };
  for (size_t i = first; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = form(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(form(t));
      v = std::move(out);
    } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      v = c10::Device(c10::DeviceType::CPU);
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  if (read.defined()) report_read(info.name.c_str(), read);
  account(info, device, dtype, /*native=*/false, cost);
}

bool returns_tensors(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns()) {
    const auto k = r.type()->kind();
    if (k == c10::TypeKind::TensorType || k == c10::TypeKind::ListType || k == c10::TypeKind::OptionalType) return true;
  }
  return false;
}

std::string first_line(const char* what) {
  std::string s(what);
  return s.substr(0, s.find('\n'));
}

// Valueless operands this large or smaller are read as zeros by ops with small results.
constexpr double kZeroReadBytes = 64.0 * 1024 * 1024;

// An op with small results computes them reading its valueless operands as the zeros (or fill)
// they read as: small ones are written with it and carry values from then on, larger ones are
// replaced by a broadcast host constant. So flags derived from valueless data (a generation's
// finished sequences) hold what a host read of that data gives. `cost` holds the operands'
// figures; the results' are added here.
void compute_reading_zeros(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpInfo& info,
                           c10::DeviceIndex device, c10::ScalarType dtype, CostInputs cost) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t first = stack->size() - nargs;
  HostScope scope(device);
  c10::SmallVector<at::Tensor, 4> keep;
  auto form = [&](const at::Tensor& t) -> at::Tensor {
    if (!is_neuron_tensor(t)) return t;
    const std::optional<c10::Scalar> fill = valueless::fill_of(t);
    if (!fill) return scope.alias(t);
    if (double(t.storage().nbytes()) <= kValuedBytes) {
      at::Tensor h = host_alias_of(t);
      h.fill_(*fill);
      valueless::forget(t.storage().data_ptr().get());
      return scope.alias(t);
    }
    // Host memory with the operand's strides, so the kernel lays out its results as it would.
    ExecutionDeviceScope host_memory(-1);
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kCPU)).fill_(*fill);
  };
  for (size_t i = first; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = form(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(form(t));
      v = std::move(out);
    } else if (v.isList() && schema.arguments()[i - first].type()->kind() == c10::TypeKind::ListType) {
      bool any = false;
      for (const c10::IValue& e : v.toListRef()) any = any || (e.isTensor() && is_neuron_tensor(e.toTensor()));
      if (!any) continue;
      c10::List<std::optional<at::Tensor>> out;
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) {
          out.push_back(form(e.toTensor()));
        } else {
          out.push_back(std::nullopt);
        }
      }
      v = std::move(out);
    } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      v = c10::Device(c10::DeviceType::CPU);
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  scope.sync_all();
  cost.bytes_out = 0;
  cost.out_numel = 0;
  replace_results(scope, stack, schema.returns().size(), cost);
  account(info, device, dtype, /*native=*/false, cost);
}

void restore(torch::jit::Stack* stack, size_t first, const std::vector<c10::IValue>& saved) {
  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  stack->insert(stack->end(), saved.begin(), saved.end());
}

}  // namespace

void set_active(bool on) { g_active.store(on); }

void set_read_reporter(ReadReporter fn) { g_reader.store(fn); }

void report_read(const char* what, const at::Tensor& t) {
  if (ReadReporter fn = g_reader.load()) fn(what, t);
}

at::Tensor MetaScope::alias(const at::Tensor& t) {
  if (!is_neuron_tensor(t)) return t;
  for (auto& tp : tensors_) {
    if (tp.device.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return tp.meta;
  }
  c10::StorageImpl* ds = t.storage().unsafeGetStorageImpl();
  c10::Storage ms;
  for (auto& sp : storages_) {
    if (sp.device.unsafeGetStorageImpl() == ds) ms = c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(sp.meta));
  }
  if (!ms) {
    ms = meta_storage(ds->nbytes());
    storages_.push_back(StoragePair{ms.unsafeGetStorageImpl(), t.storage()});
  }
  at::Tensor m = meta_like(t, std::move(ms));
  tensors_.push_back(TensorPair{m, t});
  return m;
}

c10::Storage MetaScope::device_storage(const c10::Storage& meta) {
  for (auto& sp : storages_) {
    if (sp.meta == meta.unsafeGetStorageImpl()) {
      // An out= argument the meta kernel resized: the device storage grows, with no values.
      if (meta.nbytes() > sp.device.nbytes()) {
        resize_storage_bytes(sp.device.unsafeGetStorageImpl(), meta.nbytes(), device_);
      }
      return sp.device;
    }
  }
  c10::Storage ds(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), meta.nbytes(),
                                                        device_allocator()->allocate(meta.nbytes()),
                                                        device_allocator(), /*resizable=*/true));
  storages_.push_back(StoragePair{meta.unsafeGetStorageImpl(), ds});
  return ds;
}

at::Tensor MetaScope::result(const at::Tensor& m) {
  if (!m.defined() || m.device().type() != kMeta) return m;
  for (auto& tp : tensors_) {
    if (tp.meta.unsafeGetTensorImpl() == m.unsafeGetTensorImpl()) {
      c10::Storage ds = device_storage(m.storage());
      auto* di = tp.device.unsafeGetTensorImpl();
      if (m.sizes() != tp.device.sizes() || m.strides() != tp.device.strides() ||
          m.storage_offset() != tp.device.storage_offset()) {
        di->set_sizes_and_strides(m.sizes(), m.strides(), m.storage_offset());
      }
      return tp.device;
    }
  }
  c10::Storage ds = device_storage(m.storage());
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(ds), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    m.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes(), m.strides(), m.storage_offset());
  if (m.is_conj()) t._set_conj(true);
  if (m.is_neg()) t._set_neg(true);
  valueless::mark(t);
  tensors_.push_back(TensorPair{m, t});
  return t;
}

at::Tensor empty_valueless(const at::Tensor& m, c10::DeviceIndex device) {
  MetaScope scope(device);
  return scope.result(m);
}

bool reads_valueless(const OpInfo& info, c10::ArrayRef<c10::IValue> args) {
  if (!valueless::any()) return false;
  bool found = false;
  for (size_t i = 0; i < args.size() && !found; ++i) {
    if (i < 64 && (info.out_args >> i) & 1) continue;
    each_neuron_tensor(args[i], [&](const at::Tensor& t) { found = found || valueless::contains(t); });
  }
  return found;
}

bool run_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpInfo& info, c10::DeviceIndex device,
               c10::ScalarType dtype, CostInputs& cost) {
  const auto& schema = op.schema();
  const auto& params = schema.arguments();
  const size_t nargs = params.size();
  const size_t first = stack->size() - nargs;
  const c10::ArrayRef<c10::IValue> args(stack->data() + first, nargs);
  const bool without_values = reads_valueless(info, args);
  bool operands = false;  // a neuron tensor that the op reads
  for (size_t i = 0; i < nargs && !operands; ++i) {
    if (!is_out_arg(params[i])) each_neuron_tensor(args[i], [&](const at::Tensor&) { operands = true; });
  }
  // Factory ops (arange, eye, ... into a neuron tensor) compute their values.
  if (!operands) return false;
  bool writes_args = false;
  for (const auto& p : params) writes_args = writes_args || writes(p);
  if (!returns_tensors(schema) && !writes_args) {
    if (!without_values) return false;
    run_on_zeros(op, stack, info, device, dtype, cost);
    return true;
  }

  const std::vector<c10::IValue> saved(args.begin(), args.end());
  MetaScope scope(device);
  CostInputs mc = cost;
  c10::SmallVector<c10::IValue, 8> originals;
  replace_arguments(scope, info, schema, stack, nargs, mc, originals);
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
  } catch (const std::exception& e) {
    restore(stack, first, saved);
    if (!without_values) return false;  // the op computes on its operands' values
    std::vector<c10::IValue> bounded;
    if (!data_dependent_results(info, saved, scope, bounded)) {
      TORCH_CHECK_NOT_IMPLEMENTED(
          false, "neuron shape-only execution: ", info.name, " has no meta kernel, so its results' sizes are "
          "not known without values, and its operand ", valueless_operand(saved, schema),
          " has no values (it was computed in shape-only mode). Run this part of the program outside "
          "torch_neuron.projection.shape_only() / TORCH_NEURON_SHAPE_ONLY=1, or give the op a meta "
          "kernel (torch.library.register_fake). The meta kernel said: ", first_line(e.what()));
    }
    stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
    stack->insert(stack->end(), bounded.begin(), bounded.end());
  }
  const size_t nret = schema.returns().size();
  double result_bytes = 0;
  for (size_t j = stack->size() - nret; j < stack->size(); ++j) {
    const c10::IValue& v = (*stack)[j];
    if (v.isTensor() && v.toTensor().device().type() == kMeta) result_bytes += nbytes(v.toTensor());
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) result_bytes += t.device().type() == kMeta ? nbytes(t) : 0.0;
    }
  }
  if (without_values && result_bytes <= kValuedBytes && mc.bytes_in <= kZeroReadBytes) {
    restore(stack, first, saved);
    compute_reading_zeros(op, stack, info, device, dtype, mc);
    return true;
  }
  if (!without_values) {
    // Operands with values: small results keep theirs, so control flow that reads them (masks,
    // positions, counts) goes as in an executed run.
    if (result_bytes <= kValuedBytes) {
      restore(stack, first, saved);
      return false;
    }
  }
  replace_results(scope, stack, nret, mc);
  // Arguments the op writes (in place, out=) hold no values now; a fill's constant is kept.
  static const OpInfo& fill_scalar = op_info_by_name("aten::fill_.Scalar");
  static const OpInfo& zero = op_info_by_name("aten::zero_");
  std::optional<c10::Scalar> fill;
  if (&info == &fill_scalar) fill = saved[1].toScalar();
  if (&info == &zero) fill = c10::Scalar(0);
  for (size_t i = 0; i < nargs; ++i) {
    if (writes(params[i])) each_neuron_tensor(saved[i], [&](const at::Tensor& t) { valueless::mark(t, fill); });
  }
  cost = mc;
  account(info, device, dtype, /*native=*/false, cost);
  return true;
}

}  // namespace torch_neuron::shape_only
