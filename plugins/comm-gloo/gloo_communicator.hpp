// GlooCommunicator: the `gloo` plugin, Gloo collectives over TCP on host memory.
//
// connect() rendezvouses through the run's kiln::Store (first an arrival key per rank, so a
// missing peer is named with every other missing one, then Gloo's full-mesh address exchange)
// and starts one communication thread. Collectives are numbered in issue order (#0, #1, ...
// shared by all ops), queued to that thread and run FIFO; a failure becomes a CommError naming
// op, number, dtype x count, algorithm, rank and the timeout, names the peer rank(s) found gone
// (PeerDirectory: process identities published at connect, Gloo pair addresses), and poisons
// the communicator. Small all-reduces take the star path instead (star_path.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "comm_queue.hpp"
#include "engine.hpp"
#include "peer_directory.hpp"
#include "star_path.hpp"
#include "kiln/communicator.hpp"
#include "kiln/plugin_args.hpp"

namespace kiln::gloo_comm {

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(const PluginArgs& args);
  ~GlooCommunicator() override;

  std::string_view name() const override { return "gloo"; }
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
  /// Runs `body` on the communication thread; its exceptions become the CommError described
  /// in the header, labelled "<op> #<seq> (<what>)".
  std::unique_ptr<Work> enqueue(std::string_view op, std::uint64_t seq, std::string what,
                                std::function<void(Engine&)> body);
  std::string timeout_text() const;
  /// The largest all-reduce (bytes) that takes the star path: star_max_bytes / (ranks - 1).
  std::int64_t star_limit() const;

  Algorithm algorithm_ = Algorithm::ring;
  std::string interface_;
  int bcube_base_ = 2;
  RankInfo ranks_;
  std::chrono::milliseconds timeout_{300000};
  std::string device_text_;
  std::shared_ptr<const PeerDirectory> peers_;  // read by the communication thread on failure
  std::shared_ptr<Engine> engine_;
  std::int64_t star_max_bytes_ = 0;  ///< comm.star_max_bytes; 0: no star path
  std::shared_ptr<StarPath> star_;   ///< set by connect() when the star path is on
  std::unique_ptr<CommQueue> queue_;
  std::atomic<std::uint64_t> next_seq_{0};
};

}  // namespace kiln::gloo_comm
