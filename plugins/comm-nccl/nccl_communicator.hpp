// The NCCL communicator behind the `nccl-ring` and `nccl-tree` plugins. One class; the two
// plugins differ only in the all-reduce algorithm they pin (NCCL_ALGO="allreduce:ring" or
// "allreduce:tree", see nccl_algo.hpp), which NCCL reads when a communicator is created, so each
// plugin sets it around its own ncclCommInitRankConfig. The communicator runs on the backend's
// CUDA device (Backend::device().index), which is not always the local rank's (backend.device).
//
// Decisions: the communicator is non-blocking (config.blocking = 0) so that initialisation and
// every wait poll ncclCommGetAsyncError and honour the timeout instead of hanging in NCCL;
// collectives are enqueued on the backend's communication stream (a nullptr stream means the
// backend is not a CUDA backend: refused at connect); on a timeout or an asynchronous error the
// communicator is aborted (ncclCommAbort) and unusable, as the Communicator contract says.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <kiln/backend.hpp>
#include <kiln/communicator.hpp>
#include <kiln/plugin_args.hpp>

#include "handle_pool.hpp"
#include "nccl_algo.hpp"

namespace kiln::nccl {

/// What a collective is, for messages: "all_reduce #12 (bf16 x 1048576, sum)". Kept as fields and
/// formatted by text() only when a message is needed (an error), not per collective; the strings
/// are short enough for the small-string buffer, so building one costs no heap memory.
struct CollectiveDesc {
  std::string op;
  std::uint64_t sequence = 0;
  DType dtype = DType::f32;
  std::int64_t count = 0;
  std::string extra;
  std::string text() const;
};

/// The NCCL handle shared by the communicator and its in-flight Work objects, so that a wait
/// that times out can abort the communicator it belongs to.
struct CommHandle {
  ncclComm_t comm = nullptr;
  std::atomic<bool> aborted{false};
  /// ncclCommAbort once; later calls do nothing. noexcept.
  void abort() noexcept;
  /// NCCL's last error text for this communicator ("" if none).
  std::string last_error() const;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const PluginArgs& args, Algo algo);
  ~NcclCommunicator() override;

  std::string_view name() const override { return algo_plugin_name(algo_); }
  void connect(const CommContext& ctx) override;
  int rank() const override { return ranks_.rank; }
  int size() const override { return ranks_.world_size; }
  bool accepts(MemoryKind kind) const override { return kind == MemoryKind::device; }
  std::string describe() const override;

  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override;
  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override;
  std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override;
  void barrier() override;
  void abort() noexcept override;

 private:
  void require_connected(const char* op) const;
  void require_device(const CollectiveDesc& desc, const Tensor& t, const char* role) const;
  /// Orders the communication stream after the compute stream, runs `call` (an NCCL enqueue),
  /// settles ncclInProgress, and records a pooled completion event on the stream.
  template <class Call>
  std::unique_ptr<Work> enqueue(const CollectiveDesc& desc, Call&& call);
  /// Polls until the communicator's async state leaves ncclInProgress or the deadline passes.
  void settle(const CollectiveDesc& desc, std::chrono::steady_clock::time_point deadline);
  ncclUniqueId exchange_unique_id(const CommContext& ctx);
  /// The stream-ordering event and the pool of completion events (after the device is chosen).
  void create_events();
  void init_communicator(const ncclUniqueId& id);

  Algo algo_;
  std::string algo_env_;  ///< the NCCL_ALGO value pinned at initialisation (set by connect)
  std::string nccl_debug_;
  std::int64_t max_ctas_ = 0;
  RankInfo ranks_;
  Backend* backend_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
  std::chrono::milliseconds timeout_{300000};
  std::shared_ptr<CommHandle> handle_;
  cudaStream_t compute_ = nullptr;        ///< the backend's compute stream (gradients are written there)
  cudaEvent_t compute_written_ = nullptr; ///< re-recorded per collective to order the two streams
  /// Completion events, recycled (handle_pool.hpp): one per collective in flight, not one per
  /// collective issued. Shared with the Work objects holding a lease.
  std::shared_ptr<HandlePool<cudaEvent_t>> done_events_;
  std::uint64_t sequence_ = 0;
  Tensor barrier_buffer_;
};

class NcclRingCommunicator final : public NcclCommunicator {
 public:
  explicit NcclRingCommunicator(const PluginArgs& args) : NcclCommunicator(args, Algo::ring) {}
};

class NcclTreeCommunicator final : public NcclCommunicator {
 public:
  explicit NcclTreeCommunicator(const PluginArgs& args) : NcclCommunicator(args, Algo::tree) {}
};

}  // namespace kiln::nccl
