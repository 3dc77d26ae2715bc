// Communicator: collectives across ranks (plugins `local`, `gloo`, `nccl-ring`, `nccl-tree`).
//
// Created by its factory (parameters only), then connect()ed once with the rank layout, a Store
// for rendezvous and the Backend whose memory it will see. Collectives are asynchronous: each
// returns a Work handle; wait() blocks until done or the timeout given at connect() passes.
// The core GradSync issues all_reduce per bucket while backward continues; it never issues two
// collectives concurrently from different threads.
//
// Semantics: every rank must call the same collectives in the same order with the same counts
// and dtypes. Results are identical on every rank (bit-for-bit for sum/avg of the same inputs).
// Errors: CommError naming the op, its sequence number and the ranks that did not arrive; after
// a CommError the communicator is aborted and unusable.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/tensor.hpp"

namespace kiln {

class Backend;
class Store;

enum class ReduceOp : std::uint8_t { sum = 0, avg = 1, max = 2, min = 3 };

/// Who this process is. Resolved by the core launcher (CLI, RANK/WORLD_SIZE, OMPI_*, PMI_*,
/// SLURM_*), with `source` saying which.
struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string source = "default";
};

/// What connect() gets. Store and backend outlive the communicator.
struct CommContext {
  RankInfo ranks;
  Store* store = nullptr;
  Backend* backend = nullptr;
  std::chrono::milliseconds timeout{300000};
};

/// Handle of one in-flight collective.
class Work {
 public:
  virtual ~Work();
  /// Blocks until the collective is complete (results visible to the backend's compute stream).
  /// Throws CommError on failure or timeout.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator();

  /// Plugin name ("gloo").
  virtual std::string_view name() const = 0;
  /// Rendezvous and set-up. Throws CommError (timeout lists missing ranks).
  virtual void connect(const CommContext& ctx) = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Whether collectives accept tensors in `kind` memory (Gloo: host; NCCL: device).
  virtual bool accepts(MemoryKind kind) const = 0;
  /// One line for the banner: "gloo ring over tcp (eth0)", "nccl 2.28 algo=Ring".
  virtual std::string describe() const = 0;

  /// In-place all-reduce of `t` over all ranks.
  virtual std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) = 0;
  /// Replaces `t` on every rank with root's `t`.
  virtual std::unique_ptr<Work> broadcast(const Tensor& t, int root) = 0;
  /// out (size() x in.numel()) receives every rank's `in`, in rank order.
  virtual std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) = 0;
  /// Blocks until every rank has arrived. Throws CommError on timeout.
  virtual void barrier() = 0;
  /// Tears the communicator down without waiting for peers (watchdog path). noexcept, idempotent.
  virtual void abort() noexcept = 0;
};

}  // namespace kiln
