// A Model whose methods locate their exceptions (see kiln/plugin/guarded.hpp). An error from a
// backend op the model runs inside forward() is reported as the model's forward(): that is the
// call the core made, and the backend's own message names the op.
#include "kiln/plugin/guarded.hpp"

namespace kiln::plugin {
namespace {

class GuardedModel final : public Model {
 public:
  GuardedModel(std::shared_ptr<Model> inner, PluginOrigin origin)
      : inner_(std::move(inner)), origin_(std::move(origin)) {}

  std::string_view name() const override {
    return plugin_call(origin_, "name()", [&] { return inner_->name(); });
  }
  InputSpec input_spec() const override {
    return plugin_call(origin_, "input_spec()", [&] { return inner_->input_spec(); });
  }
  void build(const ModelBuildContext& ctx) override {
    plugin_call(origin_, "build()", [&] { inner_->build(ctx); });
  }
  std::span<const Parameter> parameters() const override {
    return plugin_call(origin_, "parameters()", [&] { return inner_->parameters(); });
  }
  std::span<const ModelBuffer> buffers() const override {
    return plugin_call(origin_, "buffers()", [&] { return inner_->buffers(); });
  }
  Tensor forward(const Tensor& x, Mode mode, std::uint64_t step_seed) override {
    return plugin_call(origin_, "forward()", [&] { return inner_->forward(x, mode, step_seed); });
  }
  void backward(const Tensor& dlogits, const GradReadyFn& ready) override {
    // `ready` is core code (GradSync launching all-reduces) called from inside the plugin: its
    // errors are the core's (or the communicator's, located already) and must reach the user
    // without being blamed on the model.
    const GradReadyFn core_ready = [&ready](std::size_t index) {
      try {
        ready(index);
      } catch (...) {
        rethrow_past_plugin();
      }
    };
    plugin_call(origin_, "backward()", [&] { inner_->backward(dlogits, core_ready); });
  }

 private:
  std::shared_ptr<Model> inner_;
  PluginOrigin origin_;
};

}  // namespace

std::shared_ptr<Model> guarded(std::shared_ptr<Model> model, PluginOrigin origin) {
  return std::make_shared<GuardedModel>(std::move(model), std::move(origin));
}

}  // namespace kiln::plugin
