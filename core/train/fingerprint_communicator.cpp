// Collective fingerprinting (see the header). The fingerprint travels through the inner
// communicator itself, in memory it accepts, so it works for host (gloo) and device (nccl).
#include "kiln/train/fingerprint_communicator.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "kiln/dist/reduce_op_name.hpp"
#include "kiln/errors.hpp"

namespace kiln::train {
namespace {

constexpr std::int64_t kFields = 5;  // seq, kind, dtype, count, extra (root or reduce op)

std::string describe_print(const std::int64_t* f) {
  static const char* kinds[] = {"?", "all_reduce", "broadcast", "all_gather", "barrier"};
  const auto kind = f[1] >= 1 && f[1] <= 4 ? f[1] : 0;
  std::string what = kinds[kind];
  if (kind == 1 && f[4] >= 0 && f[4] < 4) {
    what += fmt::format("({})", dist::reduce_op_name(static_cast<ReduceOp>(f[4])));
  }
  if (kind == 2) what += fmt::format("(root {})", f[4]);
  if (kind == 4) return what;
  return fmt::format("{} {} x {}", what, dtype_name(static_cast<DType>(f[2])), f[3]);
}

}  // namespace

FingerprintCommunicator::FingerprintCommunicator(std::shared_ptr<Communicator> inner) : inner_(std::move(inner)) {}

void FingerprintCommunicator::connect(const CommContext& ctx) {
  inner_->connect(ctx);
  backend_ = ctx.backend;
  const MemoryKind where = inner_->accepts(MemoryKind::device) ? MemoryKind::device : MemoryKind::host;
  mine_ = backend_->allocate({kFields}, DType::i64, where);
  all_ = backend_->allocate({kFields * inner_->size()}, DType::i64, where);
  mine_host_ = host_tensor({kFields}, DType::i64);
  all_host_ = host_tensor({kFields * inner_->size()}, DType::i64);
}

std::string FingerprintCommunicator::describe() const {
  return inner_->describe() + " [collective fingerprints checked]";
}

void FingerprintCommunicator::check(Kind kind, const Tensor& t, std::int64_t extra) {
  std::int64_t* f = mine_host_.data_as<std::int64_t>();
  f[0] = seq_++;
  f[1] = static_cast<std::int64_t>(kind);
  f[2] = t.defined() ? static_cast<std::int64_t>(t.dtype()) : -1;
  f[3] = t.defined() ? t.numel() : 0;
  f[4] = extra;
  backend_->copy(mine_host_, mine_);
  inner_->all_gather(all_, mine_)->wait();
  backend_->copy(all_, all_host_);
  const std::int64_t* all = all_host_.data_as<std::int64_t>();
  for (int r = 0; r < inner_->size(); ++r) {
    const std::int64_t* other = all + r * kFields;
    bool same = true;
    for (std::int64_t k = 0; k < kFields; ++k) same = same && other[k] == f[k];
    if (!same) {
      throw CommError(fmt::format("collective #{} differs across ranks: rank {} runs {} (its #{}), rank {} runs {} "
                                  "(its #{}); every rank must issue the same collectives in the same order",
                                  f[0], inner_->rank(), describe_print(f), f[0], r, describe_print(other), other[0]));
    }
  }
}

std::unique_ptr<Work> FingerprintCommunicator::all_reduce(const Tensor& t, ReduceOp op) {
  check(Kind::all_reduce, t, static_cast<std::int64_t>(op));
  return inner_->all_reduce(t, op);
}

std::unique_ptr<Work> FingerprintCommunicator::broadcast(const Tensor& t, int root) {
  check(Kind::broadcast, t, root);
  return inner_->broadcast(t, root);
}

std::unique_ptr<Work> FingerprintCommunicator::all_gather(const Tensor& out, const Tensor& in) {
  check(Kind::all_gather, in, 0);
  return inner_->all_gather(out, in);
}

void FingerprintCommunicator::barrier() {
  check(Kind::barrier, Tensor(), 0);
  inner_->barrier();
}

}  // namespace kiln::train
