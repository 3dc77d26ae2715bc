// The `mlp` model: input -> [Linear -> activation -> Dropout] x len(hidden) -> Linear -> logits.
//
// Built from the core nn layers; the first Linear skips its input gradient (nobody needs
// d(images)). backward() walks the layers in reverse and reports each parameter's gradient as
// ready right after its Linear's backward, so GradSync can start reducing the last layer while
// the earlier ones are still being computed. Everything is in the compute dtype: the trainer casts
// the input in, the logits out and the dlogits back in (kiln/model.hpp).
#include <fmt/format.h>

#include <memory>
#include <vector>

#include <kiln/sdk/nn/layers.hpp>
#include <kiln/sdk/nn/parameter_store.hpp>
#include <kiln/rng.hpp>
#include <kiln/sdk/plugin.hpp>

#include "mlp_size.hpp"

namespace kiln::mlp {
namespace {

Activation parse_activation(const ParamMap& params) {
  const std::string& name = params.get_string("activation");
  if (name == "relu") return Activation::relu;
  if (name == "tanh") return Activation::tanh;
  if (name == "sigmoid") return Activation::sigmoid;
  return Activation::gelu;  // the schema's choices admit nothing else
}

}  // namespace

class MlpModel final : public Model {
 public:
  explicit MlpModel(const PluginArgs& args)
      : in_features_(args.params->get_int("in_features")),
        hidden_(args.params->get<std::vector<std::int64_t>>("hidden")),
        classes_(args.params->get_int("num_classes")),
        activation_(parse_activation(*args.params)),
        dropout_(static_cast<float>(args.params->get_float("dropout"))) {
    // The schema's ranges have checked each value; what they cannot express is the total.
    const ParamMap& p = *args.params;
    check_fits_in_memory(p, mlp_parameter_count(p, in_features_, hidden_, classes_), physical_memory_bytes());

    std::int64_t width = in_features_;
    for (std::size_t i = 0; i < hidden_.size(); ++i) {
      const nn::InputGrad grad = i == 0 ? nn::InputGrad::skip : nn::InputGrad::compute;
      blocks_.push_back(Block{std::make_unique<nn::Linear>(store_, fmt::format("layers.{}", i), width, hidden_[i], grad),
                              std::make_unique<nn::ActivationLayer>(activation_),
                              std::make_unique<nn::Dropout>(static_cast<float>(dropout_))});
      width = hidden_[i];
    }
    head_ = std::make_unique<nn::Linear>(store_, "head", width, classes_,
                                         hidden_.empty() ? nn::InputGrad::skip : nn::InputGrad::compute);
  }

  std::string_view name() const override { return "mlp"; }

  InputSpec input_spec() const override { return InputSpec{{in_features_}, DType::f32, classes_}; }

  void build(const ModelBuildContext& ctx) override {
    Backend& backend = *ctx.backend;
    store_.allocate(backend, ctx.param_dtype, ctx.compute_dtype, ctx.seed);
    store_.set_frozen(ctx);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      blocks_[i].linear->build(backend, ctx.max_batch, ctx.compute_dtype);
      blocks_[i].activation->build(backend, ctx.max_batch, hidden_[i], ctx.compute_dtype);
      blocks_[i].dropout->build(backend, ctx.max_batch, hidden_[i], ctx.compute_dtype);
    }
    head_->build(backend, ctx.max_batch, ctx.compute_dtype);
  }

  std::span<const Parameter> parameters() const override { return store_.parameters(); }

  Tensor forward(const Tensor& x, Mode mode, std::uint64_t step_seed) override {
    Tensor h = x.reshape({x.dim(0), in_features_});
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      h = blocks_[i].linear->forward(h);
      h = blocks_[i].activation->forward(h);
      h = blocks_[i].dropout->forward(h, mode, derive_seed(step_seed, i));
    }
    return head_->forward(h);
  }

  // Parameters are declared input side first, so a block's input gradient is needed only when a
  // parameter before its Linear trains; backward stops at the first block where none does (all
  // of them under a frozen backbone: only the head runs).
  void backward(const Tensor& dlogits, const GradReadyFn& ready) override {
    Tensor d = head_->backward(dlogits, input_grad_for(*head_));
    ready(head_->weight_index());
    ready(head_->bias_index());
    for (std::size_t i = blocks_.size(); i-- > 0 && d.defined();) {
      d = blocks_[i].dropout->backward(d);
      d = blocks_[i].activation->backward(d);
      d = blocks_[i].linear->backward(d, input_grad_for(*blocks_[i].linear));
      ready(blocks_[i].linear->weight_index());
      ready(blocks_[i].linear->bias_index());
    }
  }

 private:
  struct Block {
    std::unique_ptr<nn::Linear> linear;
    std::unique_ptr<nn::ActivationLayer> activation;
    std::unique_ptr<nn::Dropout> dropout;
  };

  nn::InputGrad input_grad_for(const nn::Linear& layer) const {
    return store_.trains_before(layer.weight_index()) ? nn::InputGrad::compute : nn::InputGrad::skip;
  }

  std::int64_t in_features_;
  std::vector<std::int64_t> hidden_;
  std::int64_t classes_;
  Activation activation_;
  double dropout_;
  nn::ParameterStore store_;
  std::vector<Block> blocks_;
  std::unique_ptr<nn::Linear> head_;
};

constexpr kiln_param_spec_v1 kMlpParams[] = {
    {"in_features", KILN_PARAM_INT, "784", nullptr, "Features per input sample (28x28 images flatten to 784).", "1",
     nullptr},
    {"hidden", KILN_PARAM_INT_LIST, "[128]", nullptr, "Width of each hidden layer, input side first.", "1", nullptr},
    {"activation", KILN_PARAM_STRING, "\"relu\"", "relu|tanh|sigmoid|gelu", "Activation after each hidden layer."},
    {"dropout", KILN_PARAM_FLOAT, "0.2", nullptr, "Dropout probability after each hidden activation (training only).",
     "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"num_classes", KILN_PARAM_INT, "10", nullptr, "Number of output classes (logits).", "2", nullptr},
};

}  // namespace kiln::mlp

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Model, kiln::mlp::MlpModel>(
    "mlp", "0.1.0", "Multi-layer perceptron: Linear+activation+dropout blocks and a linear head",
    kiln::mlp::kMlpParams));
