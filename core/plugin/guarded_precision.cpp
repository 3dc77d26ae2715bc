// A PrecisionPolicy whose hooks locate their exceptions (see kiln/plugin/guarded.hpp).
#include "kiln/plugin/guarded.hpp"

namespace kiln::plugin {
namespace {

class GuardedPrecision final : public PrecisionPolicy {
 public:
  GuardedPrecision(std::shared_ptr<PrecisionPolicy> inner, PluginOrigin origin)
      : inner_(std::move(inner)), origin_(std::move(origin)) {}

  std::string_view name() const override {
    return plugin_call(origin_, "name()", [&] { return inner_->name(); });
  }
  DType param_dtype() const override {
    return plugin_call(origin_, "param_dtype()", [&] { return inner_->param_dtype(); });
  }
  DType compute_dtype() const override {
    return plugin_call(origin_, "compute_dtype()", [&] { return inner_->compute_dtype(); });
  }
  void check_backend(const Backend& backend) const override {
    plugin_call(origin_, "check_backend()", [&] { inner_->check_backend(backend); });
  }
  void before_forward(Backend& backend, std::span<const Parameter> params) override {
    plugin_call(origin_, "before_forward()", [&] { inner_->before_forward(backend, params); });
  }
  float loss_scale() const override {
    return plugin_call(origin_, "loss_scale()", [&] { return inner_->loss_scale(); });
  }
  StepDecision after_allreduce(Backend& backend, std::span<const Parameter> params) override {
    return plugin_call(origin_, "after_allreduce()", [&] { return inner_->after_allreduce(backend, params); });
  }
  std::map<std::string, double> metrics() const override {
    return plugin_call(origin_, "metrics()", [&] { return inner_->metrics(); });
  }
  std::map<std::string, double> state() const override {
    return plugin_call(origin_, "state()", [&] { return inner_->state(); });
  }
  void load_state(const std::map<std::string, double>& state) override {
    plugin_call(origin_, "load_state()", [&] { inner_->load_state(state); });
  }

 private:
  std::shared_ptr<PrecisionPolicy> inner_;
  PluginOrigin origin_;
};

}  // namespace

std::shared_ptr<PrecisionPolicy> guarded(std::shared_ptr<PrecisionPolicy> policy, PluginOrigin origin) {
  return std::make_shared<GuardedPrecision>(std::move(policy), std::move(origin));
}

}  // namespace kiln::plugin
