// Sample model plugin `logreg`: multinomial logistic regression, i.e. one Linear layer from the
// flattened input to the class logits (softmax and the loss are the trainer's job).
//
// Written against the installed SDK only (find_package(Kiln)); it is what docs/writing-a-plugin.md
// walks through. Parameters arrive validated, so the constructor only checks ranges.
//
// No dtype code: under every precision policy (fp32, bf16, fp16) the trainer hands forward() the
// input already in the compute dtype, takes the logits back in that dtype and casts them to f32
// for the loss, and hands backward() dlogits in the compute dtype. The Linear layer computes in
// whatever build() told it, so the same code trains in all three.
#include <memory>

#include <kiln/sdk/nn/layers.hpp>
#include <kiln/sdk/nn/parameter_store.hpp>
#include <kiln/sdk/plugin.hpp>

namespace logreg {

class LogisticRegression final : public kiln::Model {
 public:
  explicit LogisticRegression(const kiln::PluginArgs& args)
      : in_features_(args.params->get_int("in_features")),
        classes_(args.params->get_int("num_classes")) {
    const kiln::ParamMap& p = *args.params;
    if (in_features_ < 1) throw kiln::ConfigError(p.where("in_features") + " must be at least 1");
    if (classes_ < 2) throw kiln::ConfigError(p.where("num_classes") + " must be at least 2");
    // Declares "linear.weight" (K, F) and "linear.bias" (K); nobody needs d(input).
    linear_ = std::make_unique<kiln::nn::Linear>(store_, "linear", in_features_, classes_,
                                                 kiln::nn::InputGrad::skip);
  }

  std::string_view name() const override { return "logreg"; }

  // f32: floating samples (what the data source must produce); the trainer delivers them to
  // forward() in the compute dtype.
  kiln::InputSpec input_spec() const override {
    return kiln::InputSpec{{in_features_}, kiln::DType::f32, classes_};
  }

  void build(const kiln::ModelBuildContext& ctx) override {
    store_.allocate(*ctx.backend, ctx.param_dtype, ctx.compute_dtype, ctx.seed);
    store_.set_frozen(ctx);  // [model] freeze: the Linear skips a frozen weight's gradient
    linear_->build(*ctx.backend, ctx.max_batch, ctx.compute_dtype);
  }

  std::span<const kiln::Parameter> parameters() const override { return store_.parameters(); }

  // x (B, sample_shape...) -> logits (B, K), both in the compute dtype
  kiln::Tensor forward(const kiln::Tensor& x, kiln::Mode, std::uint64_t) override {
    return linear_->forward(x.reshape({x.dim(0), in_features_}));
  }

  void backward(const kiln::Tensor& dlogits, const kiln::GradReadyFn& ready) override {
    linear_->backward(dlogits);
    ready(linear_->weight_index());
    ready(linear_->bias_index());
  }

 private:
  std::int64_t in_features_;
  std::int64_t classes_;
  kiln::nn::ParameterStore store_;
  std::unique_ptr<kiln::nn::Linear> linear_;
};

constexpr kiln_param_spec_v1 kParams[] = {
    {"in_features", KILN_PARAM_INT, "784", nullptr, "Features per input sample (28x28 images flatten to 784)."},
    {"num_classes", KILN_PARAM_INT, "10", nullptr, "Number of output classes (logits)."},
};

}  // namespace logreg

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Model, logreg::LogisticRegression>(
    "logreg", "0.1.0", "Multinomial logistic regression: one Linear layer to the class logits",
    logreg::kParams));
