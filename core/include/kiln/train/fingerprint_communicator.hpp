// A debugging wrapper that makes mismatched collectives fail fast instead of hanging.
//
// Before forwarding each collective to the real communicator, every rank all-gathers a small
// fingerprint (sequence number, op, dtype, element count, root) and compares them. If any rank
// disagrees, the run stops with both sides shown:
//   "collective #17 differs across ranks: rank 0 runs all_reduce f32 x 1024, rank 3 runs
//    broadcast(root 0) f32 x 1024"
// It costs one extra small all-gather per collective, so it is off by default
// ([dist] fingerprint = true, or the --debug-collectives flag).
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"

namespace kiln::train {

class FingerprintCommunicator final : public Communicator {
 public:
  /// `inner` does the real work. connect() connects it and allocates the fingerprint buffers.
  explicit FingerprintCommunicator(std::shared_ptr<Communicator> inner);

  std::string_view name() const override { return inner_->name(); }
  void connect(const CommContext& ctx) override;
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool accepts(MemoryKind kind) const override { return inner_->accepts(kind); }
  std::string describe() const override;

  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override;
  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override;
  std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override;
  void barrier() override;
  void abort() noexcept override { inner_->abort(); }

 private:
  enum class Kind : std::int64_t { all_reduce = 1, broadcast = 2, all_gather = 3, barrier = 4 };
  /// Exchanges this rank's fingerprint and throws CommError if the ranks disagree.
  void check(Kind kind, const Tensor& t, std::int64_t extra);

  std::shared_ptr<Communicator> inner_;
  Backend* backend_ = nullptr;
  std::int64_t seq_ = 0;
  Tensor mine_, all_, mine_host_, all_host_;
};

}  // namespace kiln::train
