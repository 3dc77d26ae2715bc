// NcclCommunicator (see nccl_communicator.hpp): device selection, unique-id exchange through
// the kiln::Store, non-blocking initialisation with NCCL_ALGO pinned, collectives on the
// backend's communication stream, and polled waits that abort on timeout.
#include "nccl_communicator.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <kiln/errors.hpp>
#include <kiln/sdk/log.hpp>
#include <kiln/store.hpp>

#include "nccl_errors.hpp"
#include "scoped_env.hpp"

namespace kiln::nccl {
namespace {

using Clock = std::chrono::steady_clock;

std::string cuda_message(std::string_view call, cudaError_t e) {
  return format_cuda_error(call, e, cudaGetErrorName(e), cudaGetErrorString(e));
}

void check_cuda(cudaError_t e, std::string_view plugin, std::string_view call) {
  if (e != cudaSuccess) throw CommError(fmt::format("{}: {}", plugin, cuda_message(call, e)));
}

/// Makes `device` current on this thread if it is not (destruction may run on any thread).
void make_device_current(int device) noexcept {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != device) cudaSetDevice(device);
}

/// Short back-off for polling loops: spin briefly (collectives of a few KB finish in
/// microseconds), then sleep so a long wait does not burn a core the backend may need.
void back_off(int& polls) {
  if (++polls < 200) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 500));
  }
}

ncclDataType_t to_nccl(DType dtype, bool& ok) {
  ok = true;
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
  }
  ok = false;
  return ncclFloat32;
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

bool is_float(DType d) { return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64; }

/// One in-flight collective: a pooled event recorded after it on the communication stream. The
/// event goes back to the pool with the Work; `desc` is formatted only if the wait fails.
class NcclWork final : public Work {
 public:
  using EventLease = HandlePool<cudaEvent_t>::Lease;
  NcclWork(std::shared_ptr<CommHandle> handle, EventLease event, CollectiveDesc desc, std::string_view plugin,
           std::chrono::milliseconds timeout)
      : handle_(std::move(handle)), event_(std::move(event)), desc_(std::move(desc)), plugin_(plugin),
        timeout_(timeout), issued_(Clock::now()) {}

  void wait() override {
    const auto deadline = issued_ + timeout_;
    int polls = 0;
    for (;;) {
      const cudaError_t q = cudaEventQuery(event_.get());
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) {
        handle_->abort();
        throw CommError(fmt::format("{} {}: {}; the communicator was aborted", plugin_, desc_.text(),
                                    cuda_message("cudaEventQuery", q)));
      }
      if (handle_->aborted.load()) {
        throw CommError(fmt::format("{} {}: the communicator was aborted while this collective was in flight",
                                    plugin_, desc_.text()));
      }
      ncclResult_t async = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(handle_->comm, &async);
      if (r != ncclSuccess) async = r;
      if (async != ncclSuccess && async != ncclInProgress) {
        const std::string detail = handle_->last_error();
        handle_->abort();
        throw CommError(fmt::format("{} {}: {}; the communicator was aborted", plugin_, desc_.text(),
                                    format_nccl_error("the collective", async, detail)));
      }
      if (Clock::now() > deadline) {
        handle_->abort();
        throw CommError(fmt::format(
            "{} {} did not complete within {} ms; the communicator was aborted. Usually a rank never "
            "called this collective (it died, or ranks called different collectives); check the other "
            "ranks' logs, or raise the timeout if the collective is legitimately slow",
            plugin_, desc_.text(), timeout_.count()));
      }
      back_off(polls);
    }
  }

 private:
  std::shared_ptr<CommHandle> handle_;
  EventLease event_;
  CollectiveDesc desc_;
  std::string_view plugin_;  ///< the plugin's name: a string literal (algo_plugin_name)
  std::chrono::milliseconds timeout_;
  Clock::time_point issued_;
};

/// Work for a collective with nothing to move.
class DoneWork final : public Work {
 public:
  void wait() override {}
};

}  // namespace

void CommHandle::abort() noexcept {
  bool expected = false;
  if (aborted.compare_exchange_strong(expected, true) && comm != nullptr) ncclCommAbort(comm);
}

std::string CommHandle::last_error() const {
  if (comm == nullptr) return {};
  const char* text = ncclGetLastError(comm);
  return text ? std::string(text) : std::string();
}

std::string CollectiveDesc::text() const {
  return fmt::format("{} #{} ({} x {}{}{})", op, sequence, dtype_name(dtype), count, extra.empty() ? "" : ", ", extra);
}

NcclCommunicator::NcclCommunicator(const PluginArgs& args, Algo algo) : algo_(algo) {
  if (args.params != nullptr) {
    nccl_debug_ = args.params->get_string("nccl_debug");
    max_ctas_ = args.params->get_int("max_ctas");
    if (max_ctas_ < 0 || max_ctas_ > 64) {
      throw ConfigError(fmt::format("{} = {} must be between 0 (NCCL's choice) and 64", args.params->where("max_ctas"),
                                    max_ctas_));
    }
  } else {
    nccl_debug_ = "WARN";
  }
  ranks_ = args.ranks;
}

void NcclCommunicator::create_events() {
  check_cuda(cudaEventCreateWithFlags(&compute_written_, cudaEventDisableTiming), name(), "cudaEventCreateWithFlags");
  // Timing-free events (the cheap kind): they only order streams and mark completion. A Work may
  // be dropped on another thread, and the last one may outlive the communicator, so destroy makes
  // the communicator's device current first (as the cuda backend's CudaEvent does).
  const int device = device_;
  const std::string_view plugin = name();
  HandlePool<cudaEvent_t>::Ops ops{
      [plugin] {
        cudaEvent_t e = nullptr;
        check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), plugin, "cudaEventCreateWithFlags");
        return e;
      },
      [device](cudaEvent_t e) {
        make_device_current(device);
        cudaEventDestroy(e);
      }};
  // 64 idle events cover the buckets of any model in flight at once (ResNet-50 with 25 MB
  // buckets has 4); more are created on demand and destroyed when they come back.
  done_events_ = HandlePool<cudaEvent_t>::make(std::move(ops), 64);
}

NcclCommunicator::~NcclCommunicator() {
  // In-flight Work keeps the event pool (and so its events) alive; this one is ours alone.
  if (compute_written_ != nullptr) {
    make_device_current(device_);
    cudaEventDestroy(compute_written_);
  }
  if (!handle_ || handle_->comm == nullptr || handle_->aborted.load()) return;
  // Finalize flushes outstanding work; if that does not settle within the timeout (a peer is
  // gone), abort instead of hanging in a destructor.
  ncclResult_t r = ncclCommFinalize(handle_->comm);
  const auto deadline = Clock::now() + timeout_;
  int polls = 0;
  while (r == ncclInProgress || r == ncclSuccess) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(handle_->comm, &state) != ncclSuccess) break;
    if (state != ncclInProgress) {
      r = state;
      break;
    }
    if (Clock::now() > deadline) break;
    back_off(polls);
  }
  if (r == ncclSuccess) {
    ncclCommDestroy(handle_->comm);
  } else {
    handle_->abort();
  }
}

std::string NcclCommunicator::describe() const {
  int version = 0;
  ncclGetVersion(&version);
  const std::string v = nccl_version_text(version);
  if (device_ < 0) return fmt::format("nccl {} algo={} (not connected)", v, algo_display_name(algo_));
  return fmt::format("nccl {} algo={} on cuda:{}", v, algo_display_name(algo_), device_);
}

void NcclCommunicator::connect(const CommContext& ctx) {
  const std::string plugin(name());
  if (handle_) throw CommError(plugin + ": connect() called twice; create a new communicator instead");
  if (ctx.backend == nullptr) throw CommError(plugin + ": connect() needs a backend (CommContext::backend is null)");
  ranks_ = ctx.ranks;
  timeout_ = ctx.timeout;
  backend_ = ctx.backend;
  stream_ = static_cast<cudaStream_t>(ctx.backend->native_stream(StreamKind::communication));
  if (stream_ == nullptr) {
    throw CommError(fmt::format(
        "{}: backend '{}' is not a CUDA backend (it has no CUDA communication stream); NCCL needs "
        "backend.type = \"cuda\", or use comm.type = \"gloo\" on the CPU",
        plugin, ctx.backend->name()));
  }
  if (ranks_.world_size > 1 && ctx.store == nullptr) {
    throw CommError(fmt::format("{}: rank {} of {} needs a rendezvous store to share the NCCL unique id "
                                "(CommContext::store is null; set KILN_RENDEZVOUS=file:<shared dir>)",
                                plugin, ranks_.rank, ranks_.world_size));
  }

  // The device is the backend's (Backend::device().index: backend.device, or the local rank by
  // default), never the local rank by itself: the buffers and the stream NCCL is given live there.
  // It is made current before any call that creates a CUDA context; cudaGetDeviceCount only
  // queries, so the refusal below can name both numbers.
  const int device = ctx.backend->device().index;
  int devices = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&devices);
  if (count_err != cudaSuccess) {
    throw CommError(fmt::format("{}: cannot use CUDA device {} (backend '{}'s device; local rank {}): {}", plugin,
                                device, ctx.backend->name(), ranks_.local_rank,
                                cuda_message("cudaGetDeviceCount", count_err)));
  }
  if (const auto problem = device_problem(device, devices)) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw CommError(fmt::format("{}: local rank {}: {} (CUDA_VISIBLE_DEVICES={}); check backend.device and start "
                                "at most {} process(es) per node",
                                plugin, ranks_.local_rank, *problem, visible ? visible : "unset", devices));
  }
  check_cuda(cudaSetDevice(device), plugin, fmt::format("cudaSetDevice({})", device));
  device_ = device;
  compute_ = static_cast<cudaStream_t>(ctx.backend->native_stream(StreamKind::compute));
  create_events();

  // The NCCL_ALGO value, checked before the unique id is shared: every rank refuses alike.
  int version = 0;
  ncclGetVersion(&version);
  const std::optional<std::string> algo = algo_env_value(algo_, version);
  if (!algo) {
    throw CommError(fmt::format("{}: NCCL {} cannot pin the tree algorithm for all-reduce alone (NCCL_ALGO=\"allreduce:"
                                "tree\" needs NCCL >= 2.24, and a bare Tree breaks broadcast and all-gather); use "
                                "comm.type = \"nccl-ring\" or a newer NCCL",
                                plugin, nccl_version_text(version)));
  }
  algo_env_ = *algo;

  auto log = log::get(plugin);
  if (set_env_default("NCCL_DEBUG", nccl_debug_)) {
    log->debug("NCCL_DEBUG={} (from comm.nccl_debug; the environment had none)", nccl_debug_);
  }

  const ncclUniqueId id = exchange_unique_id(ctx);
  init_communicator(id);
  barrier_buffer_ = backend_->allocate({1}, DType::f32, MemoryKind::device);
  backend_->fill(barrier_buffer_, 0.0);
  backend_->synchronize();
}

ncclUniqueId NcclCommunicator::exchange_unique_id(const CommContext& ctx) {
  const std::string plugin(name());
  // Every rank creates communicators in the same order, so a per-process counter names the same
  // communicator on every rank (bench-comm creates several in one run).
  static std::atomic<int> generation{0};
  const int gen = generation.fetch_add(1);
  const std::string key = fmt::format("kiln/{}/{}/unique_id", plugin, gen);
  ncclUniqueId id{};
  if (ranks_.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw CommError(fmt::format("{}: {}", plugin, format_nccl_error("ncclGetUniqueId", r)));
    if (ctx.store != nullptr) {
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(id.internal);
      ctx.store->set(key, std::vector<std::uint8_t>(bytes, bytes + NCCL_UNIQUE_ID_BYTES));
    }
    return id;
  }
  const std::vector<std::uint8_t> value = ctx.store->get(key, timeout_);
  if (value.size() != NCCL_UNIQUE_ID_BYTES) {
    throw CommError(fmt::format("{}: rendezvous key '{}' holds {} bytes, expected an ncclUniqueId of {}; another "
                                "job may be using the same rendezvous directory",
                                plugin, key, value.size(), NCCL_UNIQUE_ID_BYTES));
  }
  std::memcpy(id.internal, value.data(), NCCL_UNIQUE_ID_BYTES);
  return id;
}

void NcclCommunicator::init_communicator(const ncclUniqueId& id) {
  const std::string plugin(name());
  auto log = log::get(plugin);
  handle_ = std::make_shared<CommHandle>();
  // NCCL reads NCCL_ALGO while it initialises, and in non-blocking mode that continues after
  // ncclCommInitRankConfig returns, so the value stays set (under a process-wide lock) until the
  // communicator reports ready, and only then is the user's value restored.
  std::lock_guard<std::mutex> lock(algo_env_mutex());
  ScopedEnv algo_env("NCCL_ALGO", algo_env_);
  log->info("NCCL_ALGO={} for this communicator (rank {} of {} on cuda:{}; previous value {})", algo_env_,
            ranks_.rank, ranks_.world_size, device_,
            algo_env.previous() ? *algo_env.previous() : std::string("unset"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if (max_ctas_ > 0) config.maxCTAs = static_cast<int>(max_ctas_);
  config.commName = algo_plugin_name(algo_);
  const ncclResult_t r = ncclCommInitRankConfig(&handle_->comm, ranks_.world_size, id, ranks_.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string detail = handle_->last_error();
    handle_->abort();
    throw CommError(fmt::format("{}: {}", plugin,
                                format_nccl_error(fmt::format("ncclCommInitRankConfig(rank {} of {})", ranks_.rank,
                                                              ranks_.world_size),
                                                  r, detail)));
  }
  const auto deadline = Clock::now() + timeout_;
  int polls = 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(handle_->comm, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      const std::string detail = handle_->last_error();
      handle_->abort();
      throw CommError(fmt::format("{}: {}", plugin,
                                  format_nccl_error(fmt::format("NCCL initialisation (rank {} of {})", ranks_.rank,
                                                                ranks_.world_size),
                                                    state, detail)));
    }
    if (Clock::now() > deadline) {
      handle_->abort();
      throw CommError(fmt::format(
          "{}: NCCL initialisation did not finish within {} ms on rank {} of {}: not every rank joined the "
          "communicator; check that all {} processes started and use the same rendezvous, and the other "
          "ranks' logs",
          plugin, timeout_.count(), ranks_.rank, ranks_.world_size, ranks_.world_size));
    }
    back_off(polls);
  }
}

void NcclCommunicator::settle(const CollectiveDesc& desc, Clock::time_point deadline) {
  int polls = 0;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(handle_->comm, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      const std::string detail = handle_->last_error();
      handle_->abort();
      throw CommError(fmt::format("{} {}: {}; the communicator was aborted", name(), desc.text(),
                                  format_nccl_error("enqueue", state, detail)));
    }
    if (Clock::now() > deadline) {
      handle_->abort();
      throw CommError(fmt::format("{} {}: NCCL did not accept the collective within {} ms; the communicator was "
                                  "aborted",
                                  name(), desc.text(), timeout_.count()));
    }
    back_off(polls);
  }
}

void NcclCommunicator::require_connected(const char* op) const {
  if (!handle_ || handle_->comm == nullptr) {
    throw CommError(fmt::format("{}: {} called before connect()", name(), op));
  }
  if (handle_->aborted.load()) {
    throw CommError(fmt::format("{}: {} called after the communicator was aborted (an earlier collective failed "
                                "or timed out); it cannot be used again",
                                name(), op));
  }
}

void NcclCommunicator::require_device(const CollectiveDesc& desc, const Tensor& t, const char* role) const {
  if (!t.defined()) throw CommError(fmt::format("{} {}: the {} tensor is undefined", name(), desc.text(), role));
  if (t.memory() != MemoryKind::device) {
    throw CommError(fmt::format("{} {}: the {} tensor {} is in host memory; NCCL moves device memory only "
                                "(allocate it with MemoryKind::device on the cuda backend)",
                                name(), desc.text(), role, t.describe()));
  }
  bool ok = false;
  (void)to_nccl(t.dtype(), ok);
  if (!ok) throw CommError(fmt::format("{} {}: dtype {} has no NCCL type", name(), desc.text(), dtype_name(t.dtype())));
}

template <class Call>
std::unique_ptr<Work> NcclCommunicator::enqueue(const CollectiveDesc& desc, Call&& call) {
  if (desc.count == 0) return std::make_unique<DoneWork>();
  // The tensor was written by work the backend enqueued on its compute stream (backward, the
  // loss); NCCL runs on the communication stream, which must wait for that work first. An event
  // orders the two streams without blocking the host, so backward keeps running while earlier
  // buckets are reduced. One event serves every collective: cudaStreamWaitEvent waits for the
  // record made just before it, and re-recording later does not affect a wait already enqueued.
  // (Work::wait() blocks the host, so whatever reads the result afterwards is ordered after the
  // collective.)
  check_cuda(cudaEventRecord(compute_written_, compute_), name(), "cudaEventRecord (compute stream)");
  check_cuda(cudaStreamWaitEvent(stream_, compute_written_, 0), name(), "cudaStreamWaitEvent");
  const ncclResult_t r = call();
  if (r == ncclInProgress) {
    settle(desc, Clock::now() + timeout_);
  } else if (r != ncclSuccess) {
    const std::string detail = handle_->last_error();
    handle_->abort();
    throw CommError(fmt::format("{} {}: {}; the communicator was aborted", name(), desc.text(),
                                format_nccl_error("enqueue", r, detail)));
  }
  // The completion event comes from the pool; a failed record drops the lease, which returns it.
  NcclWork::EventLease done = done_events_->acquire();
  check_cuda(cudaEventRecord(done.get(), stream_), name(), "cudaEventRecord (communication stream)");
  return std::make_unique<NcclWork>(handle_, std::move(done), desc, name(), timeout_);
}

std::unique_ptr<Work> NcclCommunicator::all_reduce(const Tensor& t, ReduceOp op) {
  require_connected("all_reduce");
  const CollectiveDesc desc{"all_reduce", ++sequence_, t.dtype(), t.numel(), op_name(op)};
  require_device(desc, t, "input");
  if (!is_float(t.dtype())) {
    throw CommError(fmt::format("{} {}: all_reduce takes f32, f16, bf16 or f64, not {}", name(), desc.text(),
                                dtype_name(t.dtype())));
  }
  bool ok = false;
  const ncclDataType_t dt = to_nccl(t.dtype(), ok);
  ncclComm_t comm = handle_->comm;
  return enqueue(desc, [&] {
    return ncclAllReduce(t.data(), t.data(), static_cast<std::size_t>(t.numel()), dt, to_nccl(op), comm, stream_);
  });
}

std::unique_ptr<Work> NcclCommunicator::broadcast(const Tensor& t, int root) {
  require_connected("broadcast");
  const CollectiveDesc desc{"broadcast", ++sequence_, t.dtype(), t.numel(), fmt::format("root {}", root)};
  require_device(desc, t, "input");
  if (root < 0 || root >= ranks_.world_size) {
    throw CommError(fmt::format("{} {}: root {} is not a rank of this world of {}", name(), desc.text(), root,
                                ranks_.world_size));
  }
  bool ok = false;
  const ncclDataType_t dt = to_nccl(t.dtype(), ok);
  ncclComm_t comm = handle_->comm;
  return enqueue(desc, [&] {
    return ncclBroadcast(t.data(), t.data(), static_cast<std::size_t>(t.numel()), dt, root, comm, stream_);
  });
}

std::unique_ptr<Work> NcclCommunicator::all_gather(const Tensor& out, const Tensor& in) {
  require_connected("all_gather");
  const CollectiveDesc desc{"all_gather", ++sequence_, in.dtype(), in.numel(), {}};
  require_device(desc, in, "input");
  require_device(desc, out, "output");
  if (out.dtype() != in.dtype() || out.numel() != in.numel() * ranks_.world_size) {
    throw CommError(fmt::format("{} {}: the output must hold {} x {} elements of {}, but it is {}", name(),
                                desc.text(), ranks_.world_size, in.numel(), dtype_name(in.dtype()),
                                out.describe()));
  }
  bool ok = false;
  const ncclDataType_t dt = to_nccl(in.dtype(), ok);
  ncclComm_t comm = handle_->comm;
  return enqueue(desc, [&] {
    return ncclAllGather(in.data(), out.data(), static_cast<std::size_t>(in.numel()), dt, comm, stream_);
  });
}

void NcclCommunicator::barrier() {
  require_connected("barrier");
  const CollectiveDesc desc{"barrier", ++sequence_, DType::f32, 1, "all_reduce of one element"};
  ncclComm_t comm = handle_->comm;
  void* p = barrier_buffer_.data();
  enqueue(desc, [&] { return ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, comm, stream_); })->wait();
}

void NcclCommunicator::abort() noexcept {
  if (handle_) handle_->abort();
}

}  // namespace kiln::nccl
