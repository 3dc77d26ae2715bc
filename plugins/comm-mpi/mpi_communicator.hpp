// MpiCommunicator: the `mpi` plugin, MPI collectives on host memory.
//
// Ranks are MPI_COMM_WORLD's: the process must be started by mpirun (or another MPI launcher),
// and connect() checks that MPI's rank and size are the ones Kiln's launcher resolved. The
// rendezvous store is not used; MPI has its own. connect() duplicates MPI_COMM_WORLD, so Kiln's
// traffic never matches anyone else's messages.
//
// Collectives are MPI's blocking ones (MPI_Allreduce, MPI_Bcast, MPI_Allgather, MPI_Barrier),
// queued in issue order to the communicator's own MPI thread (comm_thread.hpp says why not the
// non-blocking ones); Work::wait() waits for it until done or the connect() timeout passes. f32 and f64 use MPI's own sum/max/min; f16 and bf16 use the
// operators of half_ops.hpp. avg is a sum divided by the world size after it completes, in the
// element type's precision (f16/bf16 divide in f32 and round once), as the gloo plugin does.
// Buffers of more than 2^30 elements are sent as several collectives (MPI counts are int).
//
// Failures (an MPI error code, a timeout) become a CommError naming the op, its number, dtype x
// count, and the rank, and poison the communicator. MPI cannot cancel a started collective, so
// abort() only poisons it: queued collectives are skipped, pending and later waits fail at once,
// a collective stuck inside MPI is abandoned with its thread; the process is expected to exit,
// and mpirun then stops the other ranks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/communicator.hpp"
#include "kiln/plugin_args.hpp"

namespace kiln::mpi_comm {

struct Shared;  // MPI session, duplicated communicator, reduction ops; outlives pending Works

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const PluginArgs& args);
  ~MpiCommunicator() override;

  std::string_view name() const override { return "mpi"; }
  void connect(const CommContext& ctx) override;
  int rank() const override { return ranks_.rank; }
  int size() const override { return ranks_.world_size; }
  bool accepts(MemoryKind kind) const override { return kind != MemoryKind::device; }
  std::string describe() const override;

  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override;
  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override;
  std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override;
  void barrier() override;
  void abort() noexcept override;

 private:
  void require_connected(std::string_view op) const;
  void require_host(std::string_view op, std::uint64_t seq, const Tensor& t) const;

  RankInfo ranks_;
  std::chrono::milliseconds timeout_{300000};
  std::string library_;
  std::shared_ptr<Shared> shared_;
  std::atomic<std::uint64_t> next_seq_{0};
};

}  // namespace kiln::mpi_comm
