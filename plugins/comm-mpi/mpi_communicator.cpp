// MpiCommunicator: set-up, collectives queued on the MPI thread, and their Work (see
// mpi_communicator.hpp).
#include "mpi_communicator.hpp"

#include <mpi.h>

#include <fmt/format.h>
#include <kiln/sdk/half.hpp>

#include <algorithm>
#include <climits>
#include <functional>
#include <utility>
#include <vector>

#include "comm_thread.hpp"
#include "half_ops.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "mpi_session.hpp"

namespace kiln::mpi_comm {

/// Return code of a task skipped because the communicator had already failed.
constexpr int kSkipped = -1;

/// What pending Works and the communicator share. Destroyed in order: the MPI thread (after its
/// queue), the ops and communicator, then the session, so MPI is finalised (when the plugin
/// started it) last. After a failure the thread may be stuck inside MPI; then nothing of MPI is
/// freed or finalised (the session is leaked on purpose) and the process is expected to exit.
struct Shared {
  std::unique_ptr<MpiSession> session = std::make_unique<MpiSession>();
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<HalfOps> half_ops;
  std::unique_ptr<CommThread> thread;
  std::atomic<bool> poisoned{false};
  std::string poison_reason;  // set once, before poisoned becomes true

  ~Shared() {
    thread.reset();
    if (poisoned.load()) {
      // No MPI call here: the abandoned thread may still be inside one (MPI_THREAD_SERIALIZED).
      (void)half_ops.release();
      (void)session.release();
      return;
    }
    const std::lock_guard<std::mutex> lock(mpi_lock());
    half_ops.reset();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
  }

  /// Marks the communicator unusable; the first reason is kept (later waits quote it).
  void poison(const std::string& reason) {
    const std::lock_guard<std::mutex> lock(poison_mutex);
    if (poisoned.load()) return;
    poison_reason = reason;
    poisoned.store(true);
    if (thread) thread->abandon(kSkipped);
  }
  std::mutex poison_mutex;
};

namespace {

constexpr std::int64_t kMaxChunk = std::int64_t{1} << 30;  // elements per MPI call (counts are int)

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return fmt::format("{} s", ms.count() / 1000);
  return fmt::format("{:.3g} s", static_cast<double>(ms.count()) / 1000.0);
}

MPI_Op native_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

/// Divides the reduced buffer by the world size (avg), in place.
void divide(void* data, DType dtype, std::size_t n, int world) {
  const float f = static_cast<float>(world);
  switch (dtype) {
    case DType::f32: {
      auto* p = static_cast<float*>(data);
      for (std::size_t i = 0; i < n; ++i) p[i] /= f;
      break;
    }
    case DType::f64: {
      auto* p = static_cast<double*>(data);
      const double d = static_cast<double>(world);
      for (std::size_t i = 0; i < n; ++i) p[i] /= d;
      break;
    }
    case DType::f16: {
      auto* p = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < n; ++i) p[i] = sdk::f32_to_f16(sdk::f16_to_f32(p[i]) / f);
      break;
    }
    case DType::bf16: {
      auto* p = static_cast<std::uint16_t*>(data);
      for (std::size_t i = 0; i < n; ++i) p[i] = sdk::f32_to_bf16(sdk::bf16_to_f32(p[i]) / f);
      break;
    }
    default: break;
  }
}

/// One collective (several when the buffer was chunked) queued on the MPI thread, what to do
/// once it completes (avg's division), and the words for errors.
class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<Shared> shared, std::string label, std::chrono::milliseconds timeout,
          std::vector<std::shared_ptr<Done>> parts, std::function<void()> then, Tensor keep_alive_a,
          Tensor keep_alive_b)
      : shared_(std::move(shared)), label_(std::move(label)), timeout_(timeout), parts_(std::move(parts)),
        then_(std::move(then)), a_(std::move(keep_alive_a)), b_(std::move(keep_alive_b)) {}

  void wait() override {
    if (done_) return;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (const auto& part : parts_) {
      int rc = MPI_SUCCESS;
      if (!part->wait_until(deadline, rc)) {
        fail(fmt::format("not complete after the timeout of {}; a peer may have died, hung, or issued "
                         "different collectives", seconds_text(timeout_)));
      }
      if (rc == kSkipped) {
        throw CommError(fmt::format("{} was not run: the communicator had already failed ({})", label_,
                                    shared_->poison_reason));
      }
      if (rc != MPI_SUCCESS) fail(fmt::format("MPI reported: {}", mpi_error_text(rc)));
    }
    if (then_) then_();
    done_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    const std::string message = fmt::format("{} failed: {}", label_, why);
    shared_->poison(message);
    throw CommError(message);
  }

  std::shared_ptr<Shared> shared_;
  std::string label_;
  std::chrono::milliseconds timeout_;
  std::vector<std::shared_ptr<Done>> parts_;
  std::function<void()> then_;
  Tensor a_;  // the tensors MPI reads and writes stay alive until the collective completes
  Tensor b_;
  bool done_ = false;
};

/// Queues one blocking MPI call on the thread, holding mpi_lock() while it runs.
std::shared_ptr<Done> submit(Shared& shared, std::function<int()> call) {
  return shared.thread->submit([call = std::move(call)] {
    const std::lock_guard<std::mutex> lock(mpi_lock());
    return call();
  });
}

}  // namespace

MpiCommunicator::MpiCommunicator(const PluginArgs& args) : ranks_(args.ranks) {}

MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::connect(const CommContext& ctx) {
  if (shared_) throw CommError("mpi communicator connect() called twice; connect once per run");
  ranks_ = ctx.ranks;
  timeout_ = ctx.timeout;
  auto shared = std::make_shared<Shared>();
  {
    const std::lock_guard<std::mutex> lock(mpi_lock());
    int rank = -1;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != ranks_.rank || size != ranks_.world_size) {
      // Every rank checks the same thing, so either all stop here or none do.
      throw CommError(fmt::format(
          "mpi communicator: MPI_COMM_WORLD says rank {} of {}, but Kiln's launcher resolved rank {} of {} "
          "(from {}); the mpi communicator needs its ranks started by mpirun (for example `mpirun -np {} kiln "
          "train ...`), not by --nproc or torchrun",
          rank, size, ranks_.rank, ranks_.world_size, ranks_.source, ranks_.world_size));
    }
    const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &shared->comm);
    if (rc != MPI_SUCCESS) throw CommError("mpi communicator: MPI_Comm_dup failed: " + mpi_error_text(rc));
    // Errors come back as codes instead of aborting the job, so they can name what failed.
    MPI_Comm_set_errhandler(shared->comm, MPI_ERRORS_RETURN);
    shared->half_ops = std::make_unique<HalfOps>();
    library_ = MpiSession::library_version();
  }
  shared->thread = std::make_unique<CommThread>();
  shared_ = std::move(shared);
  log::get("mpi")->info("mpi connected: rank {} of {} (from {}), {}, timeout {}", ranks_.rank, ranks_.world_size,
                        ranks_.source, library_, seconds_text(timeout_));
}

std::string MpiCommunicator::describe() const {
  return fmt::format("mpi ({})", library_.empty() ? std::string("not connected") : library_);
}

void MpiCommunicator::require_connected(std::string_view op) const {
  if (!shared_) throw CommError(fmt::format("mpi {} called before connect(); connect the communicator first", op));
  if (shared_->poisoned.load()) {
    throw CommError(fmt::format("mpi {}: the communicator is unusable after an earlier failure ({})", op,
                                shared_->poison_reason));
  }
}

void MpiCommunicator::require_host(std::string_view op, std::uint64_t seq, const Tensor& t) const {
  if (!t.defined()) throw CommError(fmt::format("mpi {} #{}: the tensor is undefined", op, seq));
  if (t.memory() == MemoryKind::device) {
    throw CommError(fmt::format("mpi {} #{}: {} is in device memory, but the mpi communicator works on "
                                "host memory; copy it to the host or use an nccl communicator",
                                op, seq, t.describe()));
  }
  if (t.layout() == Layout::opaque) {
    throw CommError(fmt::format("mpi {} #{}: {} has a backend-private layout; communicate a row-major tensor",
                                op, seq, t.describe()));
  }
}

std::unique_ptr<Work> MpiCommunicator::all_reduce(const Tensor& t, ReduceOp op) {
  require_connected("all_reduce");
  const std::uint64_t seq = next_seq_++;
  require_host("all_reduce", seq, t);
  const DType dtype = t.dtype();
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op mpi_op = MPI_OP_NULL;
  switch (dtype) {
    case DType::f32: type = MPI_FLOAT; mpi_op = native_op(op); break;
    case DType::f64: type = MPI_DOUBLE; mpi_op = native_op(op); break;
    case DType::f16:
    case DType::bf16: type = MPI_UINT16_T; mpi_op = shared_->half_ops->get(dtype, op); break;
    default:
      throw CommError(fmt::format("mpi all_reduce #{}: {} is not supported; the mpi communicator reduces "
                                  "f32, f64, f16 and bf16", seq, t.describe()));
  }
  const std::int64_t count = t.numel();
  const std::string label = fmt::format("mpi all_reduce #{} ({} x {}, {}) on rank {} of {}", seq,
                                        dtype_name(dtype), count, op_name(op), ranks_.rank, ranks_.world_size);
  std::vector<std::shared_ptr<Done>> parts;
  auto* base = static_cast<char*>(t.data());
  const std::size_t esize = dtype_size(dtype);
  const MPI_Comm comm = shared_->comm;
  for (std::int64_t at = 0; at < count; at += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - at));
    void* chunk = base + static_cast<std::size_t>(at) * esize;
    parts.push_back(submit(*shared_, [=] { return MPI_Allreduce(MPI_IN_PLACE, chunk, n, type, mpi_op, comm); }));
  }
  std::function<void()> then;
  if (op == ReduceOp::avg && count > 0) {
    const int world = ranks_.world_size;
    then = [t, dtype, count, world] { divide(t.data(), dtype, static_cast<std::size_t>(count), world); };
  }
  return std::make_unique<MpiWork>(shared_, label, timeout_, std::move(parts), std::move(then), t, Tensor());
}

std::unique_ptr<Work> MpiCommunicator::broadcast(const Tensor& t, int root) {
  require_connected("broadcast");
  const std::uint64_t seq = next_seq_++;
  require_host("broadcast", seq, t);
  if (root < 0 || root >= ranks_.world_size) {
    throw CommError(fmt::format("mpi broadcast #{}: root {} is not a rank of a world of {}", seq, root,
                                ranks_.world_size));
  }
  const std::string label = fmt::format("mpi broadcast #{} ({} x {}, root {}) on rank {} of {}", seq,
                                        dtype_name(t.dtype()), t.numel(), root, ranks_.rank, ranks_.world_size);
  std::vector<std::shared_ptr<Done>> parts;
  auto* base = static_cast<char*>(t.data());
  const auto bytes = static_cast<std::int64_t>(t.bytes());
  const MPI_Comm comm = shared_->comm;
  for (std::int64_t at = 0; at < bytes; at += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, bytes - at));
    void* chunk = base + at;
    parts.push_back(submit(*shared_, [=] { return MPI_Bcast(chunk, n, MPI_BYTE, root, comm); }));
  }
  return std::make_unique<MpiWork>(shared_, label, timeout_, std::move(parts), nullptr, t, Tensor());
}

std::unique_ptr<Work> MpiCommunicator::all_gather(const Tensor& out, const Tensor& in) {
  require_connected("all_gather");
  const std::uint64_t seq = next_seq_++;
  require_host("all_gather", seq, out);
  require_host("all_gather", seq, in);
  if (out.dtype() != in.dtype() || out.numel() != in.numel() * ranks_.world_size) {
    throw CommError(fmt::format("mpi all_gather #{}: out {} must hold {} x {} (world size x in {})", seq,
                                out.describe(), ranks_.world_size, in.numel(), in.describe()));
  }
  // One MPI_Iallgather: its count is per rank, so the limit is INT_MAX bytes from each rank.
  if (in.bytes() > static_cast<std::size_t>(INT_MAX)) {
    throw CommError(fmt::format("mpi all_gather #{}: {} is {} bytes, more than the {} bytes one MPI all-gather "
                                "takes from each rank; gather it in pieces",
                                seq, in.describe(), in.bytes(), INT_MAX));
  }
  const std::string label = fmt::format("mpi all_gather #{} ({} x {}) on rank {} of {}", seq,
                                        dtype_name(in.dtype()), in.numel(), ranks_.rank, ranks_.world_size);
  const int n = static_cast<int>(in.bytes());
  void* send = in.data();
  void* recv = out.data();
  const MPI_Comm comm = shared_->comm;
  auto part = submit(*shared_, [=] { return MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm); });
  return std::make_unique<MpiWork>(shared_, label, timeout_, std::vector<std::shared_ptr<Done>>{part}, nullptr, out, in);
}

void MpiCommunicator::barrier() {
  require_connected("barrier");
  const std::uint64_t seq = next_seq_++;
  const std::string label = fmt::format("mpi barrier #{} on rank {} of {}", seq, ranks_.rank, ranks_.world_size);
  const MPI_Comm comm = shared_->comm;
  auto part = submit(*shared_, [comm] { return MPI_Barrier(comm); });
  MpiWork(shared_, label, timeout_, {part}, nullptr, Tensor(), Tensor()).wait();
}

void MpiCommunicator::abort() noexcept {
  if (!shared_ || shared_->poisoned.load()) return;
  try {
    shared_->poison(fmt::format("aborted on rank {} of {}", ranks_.rank, ranks_.world_size));
    log::get("mpi")->warn("mpi communicator aborted on rank {} of {}", ranks_.rank, ranks_.world_size);
  } catch (...) {
  }
}

}  // namespace kiln::mpi_comm
