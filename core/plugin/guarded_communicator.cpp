// A Communicator whose calls, and the Work handles they return, locate their exceptions (see
// kiln/plugin/guarded.hpp). A collective usually fails in wait(), not where it was launched,
// hence the wrapped Work: one small allocation per collective (a gradient bucket), not per op.
#include "kiln/plugin/guarded.hpp"

namespace kiln::plugin {
namespace {

class GuardedWork final : public Work {
 public:
  // `method` names the wait and its collective, e.g. "all_reduce() wait()" (a literal).
  GuardedWork(std::unique_ptr<Work> inner, std::shared_ptr<const PluginOrigin> origin, const char* method)
      : inner_(std::move(inner)), origin_(std::move(origin)), method_(method) {}

  void wait() override {
    plugin_call(*origin_, method_, [&] { inner_->wait(); });
  }

 private:
  std::unique_ptr<Work> inner_;
  std::shared_ptr<const PluginOrigin> origin_;  // shared: a handle may outlive its communicator
  const char* method_;
};

class GuardedCommunicator final : public Communicator {
 public:
  GuardedCommunicator(std::shared_ptr<Communicator> inner, PluginOrigin origin)
      : inner_(std::move(inner)), shared_origin_(std::make_shared<const PluginOrigin>(std::move(origin))),
        origin_(*shared_origin_) {}

  std::string_view name() const override {
    return plugin_call(origin_, "name()", [&] { return inner_->name(); });
  }
  void connect(const CommContext& ctx) override {
    plugin_call(origin_, "connect()", [&] { inner_->connect(ctx); });
  }
  int rank() const override {
    return plugin_call(origin_, "rank()", [&] { return inner_->rank(); });
  }
  int size() const override {
    return plugin_call(origin_, "size()", [&] { return inner_->size(); });
  }
  bool accepts(MemoryKind kind) const override {
    return plugin_call(origin_, "accepts()", [&] { return inner_->accepts(kind); });
  }
  std::string describe() const override {
    return plugin_call(origin_, "describe()", [&] { return inner_->describe(); });
  }
  std::unique_ptr<Work> all_reduce(const Tensor& t, ReduceOp op) override {
    return wrap(plugin_call(origin_, "all_reduce()", [&] { return inner_->all_reduce(t, op); }), "all_reduce() wait()");
  }
  std::unique_ptr<Work> broadcast(const Tensor& t, int root) override {
    return wrap(plugin_call(origin_, "broadcast()", [&] { return inner_->broadcast(t, root); }), "broadcast() wait()");
  }
  std::unique_ptr<Work> all_gather(const Tensor& out, const Tensor& in) override {
    return wrap(plugin_call(origin_, "all_gather()", [&] { return inner_->all_gather(out, in); }), "all_gather() wait()");
  }
  void barrier() override {
    plugin_call(origin_, "barrier()", [&] { inner_->barrier(); });
  }
  void abort() noexcept override { inner_->abort(); }

 private:
  std::unique_ptr<Work> wrap(std::unique_ptr<Work> work, const char* method) const {
    if (!work) return work;
    return std::make_unique<GuardedWork>(std::move(work), shared_origin_, method);
  }

  std::shared_ptr<Communicator> inner_;
  std::shared_ptr<const PluginOrigin> shared_origin_;
  const PluginOrigin& origin_;
};

}  // namespace

std::shared_ptr<Communicator> guarded(std::shared_ptr<Communicator> comm, PluginOrigin origin) {
  return std::make_shared<GuardedCommunicator>(std::move(comm), std::move(origin));
}

}  // namespace kiln::plugin
