#include "distributed/ProcessGroupNeuron.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/Event.h>
#include <neuron_ccl/neuron_ccl.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "runtime/NeuronStream.h"

namespace torch_neuron::distributed {
namespace {

using neuron_ccl::DataType;
constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// A tensor as neuron_ccl sees it: a contiguous device buffer. Non-contiguous tensors are
// staged through a contiguous copy, written back for outputs.
struct Flat {
  at::Tensor original, contig;
  DataType dt = DataType::kFloat32;
  size_t count = 0;
  bool complex = false;
  void* ptr() const { return contig.numel() ? contig.data_ptr() : nullptr; }
  void write_back() {
    if (!contig.is_same(original)) original.copy_(complex ? at::view_as_complex(contig) : contig);
  }
  neuron_ccl::Buffer buffer() const { return {ptr(), count}; }
};

DataType to_ccl(at::ScalarType t, const char* op) {
  switch (t) {
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBFloat16;
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUInt8;
    case at::kShort: return DataType::kInt16;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kBool: return DataType::kBool;
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e5m2: return DataType::kUInt8;  // moved as bytes; reductions are refused
    default: break;
  }
  TORCH_CHECK(false, "ProcessGroupNeuron::", op, ": dtype ", t,
              " is not supported by backend 'neuron' (float32/64, float16, bfloat16, complex64/128, "
              "int8/16/32/64, uint8, bool, float8 for non-reducing ops)");
}

Flat flat(const at::Tensor& t, const char* op, const char* role, size_t index) {
  TORCH_CHECK(t.defined(), "ProcessGroupNeuron::", op, ": ", role, " tensor ", index, " is undefined");
  TORCH_CHECK(t.device().type() == kNeuron, "ProcessGroupNeuron::", op, ": ", role, " tensor ", index, " is on ",
              t.device(), "; backend 'neuron' handles neuron tensors only. Move it with .to('neuron'), or "
              "initialise with init_process_group('cpu:gloo,neuron:neuron') so CPU tensors go to gloo");
  Flat f;
  f.original = t;
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  if (c.is_complex()) {
    f.complex = true;
    c = at::view_as_real(c);
  }
  f.contig = c;
  f.dt = to_ccl(c.scalar_type(), op);
  f.count = size_t(c.numel());
  return f;
}

neuron_ccl::Reduction reduction(const c10d::ReduceOp& op, const Flat& f, const char* name) {
  using R = neuron_ccl::ReduceOp;
  neuron_ccl::Reduction r;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: r.op = R::kSum; break;
    case c10d::ReduceOp::AVG: r.op = R::kAvg; break;
    case c10d::ReduceOp::PRODUCT: r.op = R::kProduct; break;
    case c10d::ReduceOp::MIN: r.op = R::kMin; break;
    case c10d::ReduceOp::MAX: r.op = R::kMax; break;
    case c10d::ReduceOp::BAND: r.op = R::kBand; break;
    case c10d::ReduceOp::BOR: r.op = R::kBor; break;
    case c10d::ReduceOp::BXOR: r.op = R::kBxor; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      r.op = R::kPremulSum;
      auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s, "ProcessGroupNeuron::", name, ": PREMUL_SUM without a factor");
      r.premul_factor = s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
      break;
    }
    default:
      TORCH_CHECK(false, "ProcessGroupNeuron::", name, ": unsupported reduce op ", int(op.op_));
  }
  TORCH_CHECK(!f.complex || r.op == R::kSum || r.op == R::kAvg || r.op == R::kPremulSum, "ProcessGroupNeuron::",
              name, ": complex tensors support SUM, AVG and PREMUL_SUM only");
  TORCH_CHECK(f.original.scalar_type() != at::kFloat8_e4m3fn && f.original.scalar_type() != at::kFloat8_e5m2,
              "ProcessGroupNeuron::", name, ": float8 tensors cannot be reduced; reduce in bfloat16 or float32");
  return r;
}

nsimQueue queue_for(const at::Tensor& t) { return torch_neuron::current_queue(t.device().index()); }

void check_single(const std::vector<at::Tensor>& v, const char* op) {
  TORCH_CHECK(v.size() == 1, "ProcessGroupNeuron::", op, ": expects one tensor per process (got ", v.size(),
              "); backend 'neuron' drives one device per rank");
}

// Converts neuron_ccl errors into c10d's error types so that callers (and torchelastic)
// can tell timeouts from other failures.
template <class F>
void guarded(const char* op, F f) {
  try {
    f();
  } catch (const neuron_ccl::Error& e) {
    if (e.kind() == neuron_ccl::Error::kTimeout) C10_THROW_ERROR(DistBackendError, e.what());
    if (e.kind() == neuron_ccl::Error::kInvalidArgument) C10_THROW_ERROR(ValueError, e.what());
    C10_THROW_ERROR(DistBackendError, e.what());
  }
}

class StoreAdapter : public neuron_ccl::KVStore {
 public:
  explicit StoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& k, const std::string& v) override {
    store_->set(k, std::vector<uint8_t>(v.begin(), v.end()));
  }
  std::string get(const std::string& k) override {
    const auto v = store_->get(k);
    return std::string(v.begin(), v.end());
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

// ------------------------------------------------------------------ WorkNeuron
WorkNeuron::WorkNeuron(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::Stream stream,
                       std::shared_ptr<neuron_ccl::Communicator> comm, int send_peer)
    : c10d::Work(rank, type), outputs_(std::move(outputs)), stream_(stream), comm_(std::move(comm)),
      send_peer_(send_peer) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     std::vector<c10::Device>{stream_.device()});
  {
    // The future records its completion event on the current stream: make that the
    // collective's stream.
    c10::impl::VirtualGuardImpl guard(kNeuron);
    const c10::Stream prev = guard.exchangeStream(stream_);
    future_->markCompleted(c10::IValue(outputs_));
    guard.exchangeStream(prev);
  }
  finish();
}

bool WorkNeuron::isCompleted() { return true; }
bool WorkNeuron::isSuccess() const { return true; }

bool WorkNeuron::wait(std::chrono::milliseconds) {
  if (comm_ && send_peer_ >= 0) {
    try {
      comm_->wait_sends(send_peer_);
    } catch (const neuron_ccl::Error& e) {
      C10_THROW_ERROR(DistBackendError, e.what());
    }
  }
  synchronize();
  return true;
}

void WorkNeuron::synchronize() {
  // Later work on the caller's current stream starts after the collective (no host block).
  const c10::Stream current = torch_neuron::current_stream(stream_.device_index());
  if (current == stream_) return;
  c10::Event ev(kNeuron);
  ev.record(stream_);
  ev.block(current);
}

std::vector<at::Tensor> WorkNeuron::result() { return outputs_; }
c10::intrusive_ptr<c10::ivalue::Future> WorkNeuron::getFuture() { return future_; }

// ------------------------------------------------------------------ ProcessGroupNeuron
ProcessGroupNeuron::ProcessGroupNeuron(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout, int device,
                                       const std::string& group_name)
    : c10d::Backend(rank, size), device_(device) {
  neuron_ccl::CommOptions o;
  o.device = device;
  o.timeout = timeout;
  o.name = group_name.empty() ? "default" : group_name;
  if (const char* lr = std::getenv("LOCAL_RANK")) o.local_rank = std::atoi(lr);
  guarded("init", [&] { comm_ = neuron_ccl::Communicator::create(std::make_shared<StoreAdapter>(store), rank, size, o); });
}

ProcessGroupNeuron::~ProcessGroupNeuron() = default;

void ProcessGroupNeuron::setTimeout(std::chrono::milliseconds timeout) { comm_->set_timeout(timeout); }
void ProcessGroupNeuron::abort() { comm_->abort("ProcessGroup abort()"); }
void ProcessGroupNeuron::shutdown() {}
std::string ProcessGroupNeuron::flightRecord() const { return comm_->flight_record(); }

void ProcessGroupNeuron::startCoalescing() {
  coalescing_ = true;
  coalesced_outputs_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::endCoalescing() {
  coalescing_ = false;
  auto outs = std::move(coalesced_outputs_);
  coalesced_outputs_.clear();
  const c10::Stream s = torch_neuron::current_stream(c10::DeviceIndex(device_));
  return c10::make_intrusive<WorkNeuron>(rank_, c10d::OpType::COALESCED, std::move(outs), s);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::done(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                        const at::Tensor& like, int send_peer) {
  const c10::DeviceIndex d = like.defined() && like.device().type() == kNeuron ? like.device().index()
                                                                              : c10::DeviceIndex(device_);
  if (coalescing_) coalesced_outputs_.insert(coalesced_outputs_.end(), outputs.begin(), outputs.end());
  return c10::make_intrusive<WorkNeuron>(rank_, type, std::move(outputs), torch_neuron::current_stream(d),
                                         send_peer >= 0 ? comm_ : nullptr, send_peer);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  check_single(tensors, "broadcast");
  Flat f = flat(tensors[0], "broadcast", "input", 0);
  guarded("broadcast", [&] { comm_->broadcast(f.ptr(), f.count, f.dt, int(opts.rootRank), queue_for(f.contig)); });
  f.write_back();
  return done(c10d::OpType::BROADCAST, tensors, tensors[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  check_single(tensors, "allreduce");
  Flat f = flat(tensors[0], "allreduce", "input", 0);
  const auto red = reduction(opts.reduceOp, f, "allreduce");
  guarded("allreduce", [&] { comm_->all_reduce(f.ptr(), f.ptr(), f.count, f.dt, red, queue_for(f.contig)); });
  f.write_back();
  return done(c10d::OpType::ALLREDUCE, tensors, tensors[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    Flat f = flat(tensors[i], "allreduce_coalesced", "input", i);
    const auto red = reduction(opts.reduceOp, f, "allreduce_coalesced");
    guarded("allreduce_coalesced",
            [&] { comm_->all_reduce(f.ptr(), f.ptr(), f.count, f.dt, red, queue_for(f.contig)); });
    f.write_back();
  }
  return done(c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors.empty() ? at::Tensor() : tensors[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  check_single(tensors, "reduce");
  Flat f = flat(tensors[0], "reduce", "input", 0);
  const auto red = reduction(opts.reduceOp, f, "reduce");
  guarded("reduce", [&] {
    comm_->reduce(f.ptr(), f.ptr(), f.count, f.dt, red, int(opts.rootRank), queue_for(f.contig));
  });
  if (rank_ == int(opts.rootRank)) f.write_back();
  return done(c10d::OpType::REDUCE, tensors, tensors[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  check_single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && int(outputs[0].size()) == size_, "ProcessGroupNeuron::allgather: expects one "
              "output list of ", size_, " tensors (the group size)");
  Flat in = flat(inputs[0], "allgather", "input", 0);
  std::vector<Flat> outs;
  std::vector<neuron_ccl::Buffer> bufs;
  for (size_t i = 0; i < outputs[0].size(); ++i) {
    outs.push_back(flat(outputs[0][i], "allgather", "output", i));
    TORCH_CHECK(outs.back().dt == in.dt, "ProcessGroupNeuron::allgather: output ", i, " dtype ",
                outputs[0][i].scalar_type(), " differs from the input's ", inputs[0].scalar_type());
    bufs.push_back(outs.back().buffer());
  }
  guarded("allgather", [&] { comm_->all_gather_v(in.ptr(), in.count, bufs, in.dt, queue_for(in.contig)); });
  for (auto& o : outs) o.write_back();
  return done(c10d::OpType::ALLGATHER, outputs[0], inputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& opts) {
  Flat in = flat(input, "_allgather_base", "input", 0);
  Flat out = flat(output, "_allgather_base", "output", 0);
  TORCH_CHECK(out.count == in.count * size_t(size_) && out.dt == in.dt, "ProcessGroupNeuron::all_gather_into_tensor: "
              "output has ", output.numel(), " elements of ", output.scalar_type(), ", expected group size ", size_,
              " x input ", input.numel(), " of ", input.scalar_type());
  guarded("_allgather_base", [&] { comm_->all_gather(in.ptr(), out.ptr(), in.count, in.dt, queue_for(in.contig)); });
  out.write_back();
  return done(c10d::OpType::_ALLGATHER_BASE, {output}, output);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupNeuron::allgather_coalesced: ", outputs.size(),
              " output lists for ", inputs.size(), " inputs");
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<std::vector<at::Tensor>> o{outputs[i]};
    std::vector<at::Tensor> in{inputs[i]};
    allgather(o, in, opts);
    all.insert(all.end(), outputs[i].begin(), outputs[i].end());
  }
  return done(c10d::OpType::ALLGATHER_COALESCED, all, inputs.empty() ? at::Tensor() : inputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupNeuron::allgather_into_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
  return done(c10d::OpType::COALESCED, outputs, outputs.empty() ? at::Tensor() : outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  check_single(inputs, "gather");
  const int root = int(opts.rootRank);
  Flat in = flat(inputs[0], "gather", "input", 0);
  std::vector<Flat> outs;
  std::vector<neuron_ccl::Buffer> bufs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && int(outputs[0].size()) == size_, "ProcessGroupNeuron::gather: the root "
                "needs one output list of ", size_, " tensors");
    for (size_t i = 0; i < outputs[0].size(); ++i) {
      outs.push_back(flat(outputs[0][i], "gather", "output", i));
      bufs.push_back(outs.back().buffer());
    }
  }
  guarded("gather", [&] { comm_->gather(in.ptr(), in.count, bufs, in.dt, root, queue_for(in.contig)); });
  for (auto& o : outs) o.write_back();
  return done(c10d::OpType::GATHER, rank_ == root ? outputs[0] : std::vector<at::Tensor>{}, inputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  check_single(outputs, "scatter");
  const int root = int(opts.rootRank);
  Flat out = flat(outputs[0], "scatter", "output", 0);
  std::vector<Flat> ins;
  std::vector<neuron_ccl::Buffer> bufs;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && int(inputs[0].size()) == size_, "ProcessGroupNeuron::scatter: the root "
                "needs one input list of ", size_, " tensors");
    for (size_t i = 0; i < inputs[0].size(); ++i) {
      ins.push_back(flat(inputs[0][i], "scatter", "input", i));
      bufs.push_back(ins.back().buffer());
    }
  }
  guarded("scatter", [&] { comm_->scatter(bufs, out.ptr(), out.count, out.dt, root, queue_for(out.contig)); });
  out.write_back();
  return done(c10d::OpType::SCATTER, outputs, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  check_single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && int(inputs[0].size()) == size_, "ProcessGroupNeuron::reduce_scatter: expects "
              "one input list of ", size_, " tensors (the group size)");
  Flat out = flat(outputs[0], "reduce_scatter", "output", 0);
  const auto red = reduction(opts.reduceOp, out, "reduce_scatter");
  std::vector<Flat> ins;
  std::vector<neuron_ccl::Buffer> bufs;
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    ins.push_back(flat(inputs[0][i], "reduce_scatter", "input", i));
    bufs.push_back(ins.back().buffer());
  }
  guarded("reduce_scatter",
          [&] { comm_->reduce_scatter_v(bufs, out.ptr(), out.count, out.dt, red, queue_for(out.contig)); });
  out.write_back();
  return done(c10d::OpType::REDUCE_SCATTER, outputs, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  Flat in = flat(input, "_reduce_scatter_base", "input", 0);
  Flat out = flat(output, "_reduce_scatter_base", "output", 0);
  TORCH_CHECK(in.count == out.count * size_t(size_) && out.dt == in.dt, "ProcessGroupNeuron::reduce_scatter_tensor: "
              "input has ", input.numel(), " elements of ", input.scalar_type(), ", expected group size ", size_,
              " x output ", output.numel(), " of ", output.scalar_type());
  const auto red = reduction(opts.reduceOp, out, "_reduce_scatter_base");
  guarded("_reduce_scatter_base",
          [&] { comm_->reduce_scatter(in.ptr(), out.ptr(), out.count, out.dt, red, queue_for(out.contig)); });
  out.write_back();
  return done(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, output);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ProcessGroupNeuron::reduce_scatter_tensor_coalesced: ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
  return done(c10d::OpType::COALESCED, outputs, outputs.empty() ? at::Tensor() : outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& output_split_sizes,
                                                                 std::vector<int64_t>& input_split_sizes,
                                                                 const c10d::AllToAllOptions& opts) {
  Flat in = flat(input, "alltoall_base", "input", 0);
  Flat out = flat(output, "alltoall_base", "output", 0);
  TORCH_CHECK(in.dt == out.dt, "ProcessGroupNeuron::all_to_all_single: input dtype ", input.scalar_type(),
              " differs from the output's ", output.scalar_type());
  // Split sizes count rows of dim 0; an empty list splits evenly.
  auto blocks = [&](const Flat& f, const at::Tensor& t, const std::vector<int64_t>& splits, const char* role) {
    const size_t rows = t.dim() ? size_t(t.size(0)) : 1;
    const size_t row_elems = rows ? f.count / rows : 0;
    std::vector<neuron_ccl::Buffer> v(size_);
    const size_t es = neuron_ccl::dtype_size(f.dt);
    size_t off = 0;
    if (!splits.empty()) {
      TORCH_CHECK(int(splits.size()) == size_, "ProcessGroupNeuron::all_to_all_single: ", role, " split sizes have ",
                  splits.size(), " entries for a group of ", size_);
    } else {
      TORCH_CHECK(rows % size_t(size_) == 0, "ProcessGroupNeuron::all_to_all_single: ", role, " dim 0 (", rows,
                  ") is not divisible by the group size ", size_, "; pass split sizes");
    }
    for (int r = 0; r < size_; ++r) {
      const size_t n = (splits.empty() ? rows / size_t(size_) : size_t(splits[r])) * row_elems;
      v[r] = {static_cast<char*>(f.ptr()) + off * es, n};
      off += n;
    }
    TORCH_CHECK(off <= f.count, "ProcessGroupNeuron::all_to_all_single: ", role, " split sizes sum to more rows than ",
                role, " has (", rows, ")");
    return v;
  };
  auto send = blocks(in, in.contig, input_split_sizes, "input");
  auto recv = blocks(out, out.contig, output_split_sizes, "output");
  guarded("alltoall_base", [&] { comm_->all_to_all_v(send, recv, in.dt, queue_for(in.contig)); });
  out.write_back();
  return done(c10d::OpType::ALLTOALL_BASE, {output}, output);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(int(outputs.size()) == size_ && int(inputs.size()) == size_, "ProcessGroupNeuron::all_to_all: expects ",
              size_, " input and output tensors, got ", inputs.size(), " and ", outputs.size());
  std::vector<Flat> ins, outs;
  std::vector<neuron_ccl::Buffer> send, recv;
  for (int r = 0; r < size_; ++r) {
    ins.push_back(flat(inputs[r], "alltoall", "input", r));
    outs.push_back(flat(outputs[r], "alltoall", "output", r));
    send.push_back(ins.back().buffer());
    recv.push_back(outs.back().buffer());
  }
  guarded("alltoall", [&] { comm_->all_to_all_v(send, recv, ins[0].dt, queue_for(ins[0].contig)); });
  for (auto& o : outs) o.write_back();
  return done(c10d::OpType::ALLTOALL, outputs, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  check_single(tensors, "send");
  Flat f = flat(tensors[0], "send", "input", 0);
  guarded("send", [&] { comm_->send(f.ptr(), f.count, f.dt, dst, tag, queue_for(f.contig)); });
  // The receiver copies from this buffer: keep the (possibly staged) tensor alive in the work.
  return done(c10d::OpType::SEND, {f.contig}, tensors[0], dst);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  check_single(tensors, "recv");
  Flat f = flat(tensors[0], "recv", "output", 0);
  guarded("recv", [&] { comm_->recv(f.ptr(), f.count, f.dt, src, tag, queue_for(f.contig)); });
  f.write_back();
  return done(c10d::OpType::RECV, tensors, tensors[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  guarded("barrier", [&] { comm_->barrier(torch_neuron::current_queue(c10::DeviceIndex(device_))); });
  return done(c10d::OpType::BARRIER, {}, at::Tensor());
}

}  // namespace torch_neuron::distributed
