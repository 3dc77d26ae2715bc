// The `local` communicator: a world of one rank. Every collective is complete when issued
// (a sum over one rank is the identity), which keeps the single-process path free of any
// transport while the trainer still goes through the same GradSync code as a real world.
#include <fmt/format.h>

#include <kiln/sdk/plugin.hpp>

namespace kiln::local {
namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
};

}  // namespace

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(const PluginArgs&) {}

  std::string_view name() const override { return "local"; }

  void connect(const CommContext& ctx) override {
    if (ctx.ranks.world_size != 1) {
      throw CommError(fmt::format(
          "comm.type = \"local\" runs one rank, but this process is rank {} of {} (from {}); "
          "choose a multi-rank communicator such as gloo",
          ctx.ranks.rank, ctx.ranks.world_size, ctx.ranks.source));
    }
    backend_ = ctx.backend;
  }

  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool accepts(MemoryKind) const override { return true; }
  std::string describe() const override { return "local (one rank, no transport)"; }

  std::unique_ptr<Work> all_reduce(const Tensor&, ReduceOp) override { return std::make_unique<DoneWork>(); }
  std::unique_ptr<Work> broadcast(const Tensor&, int root) override {
    if (root != 0) throw CommError(fmt::format("broadcast from root {} in a world of one rank", root));
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override {
    if (out.numel() != in.numel() || out.dtype() != in.dtype()) {
      throw CommError(fmt::format("all_gather into {} from {}: with one rank both must match",
                                  out.describe(), in.describe()));
    }
    if (out.data() != in.data()) backend_->copy(in, out);
    return std::make_unique<DoneWork>();
  }
  void barrier() override {}
  void abort() noexcept override {}

 private:
  Backend* backend_ = nullptr;
};

}  // namespace kiln::local

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Communicator, kiln::local::LocalCommunicator>(
    "local", "0.1.0", "One rank, no transport: every collective is the identity"));
