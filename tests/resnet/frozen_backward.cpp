// Frozen parameters in the models' backward (ModelBuildContext::frozen, [model] freeze): a model
// built with some parameters frozen gives every trainable parameter the same gradient, bit for
// bit, as the model built without, and leaves undone the work nobody reads. Frozen gradients
// start at 1.0, so one the model computes shows (gradients accumulate, and these are far above
// 1.0's rounding step):
//   - a frozen convolution or linear weight (and linear bias) is never written;
//   - under a frozen prefix (backbone, stem + early stages) nothing frozen is written at all:
//     backward stops above it, batch-norm included;
//   - frozen layers between trainable ones still pass the gradient through (their batch-norms
//     then write their own frozen gradients, which the trainer zeroes).
// The logits, in train and eval mode, stay the same bits too, although the layers of a frozen
// prefix share their forward buffers (ResnetModel::frozen_prefix_blocks()). ResNet-18 covers the
// residual join (identity and downsample shortcuts); the MLP the head and the input-side stop.
#include <boost/test/unit_test.hpp>

#include <fnmatch.h>

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nn_fixture.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::test::cpu;

constexpr double kUntouched = 1.0;  // what a frozen gradient starts at

/// Whether `name` matches one of the fnmatch patterns.
bool matches(const std::vector<std::string>& patterns, const std::string& name) {
  for (const std::string& p : patterns) {
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

struct Pass {
  std::vector<double> logits, eval_logits;
  std::vector<std::vector<double>> grads;  // per parameter, after one forward and backward
  std::vector<int> reported;               // ready() calls per parameter
  std::vector<bool> frozen;                // kParamFrozen as the model marked it
};

/// One batch and the gradient of its logits, drawn from fixed seeds.
struct Batch {
  Batch(kiln::Shape shape, std::int64_t classes) : shape(std::move(shape)) {
    std::mt19937 rng(1);
    x = kiln::test::uniform(static_cast<std::size_t>(kiln::shape_numel(this->shape)), rng);
    dlogits = kiln::test::uniform(static_cast<std::size_t>(this->shape[0] * classes), rng);
  }
  kiln::Shape shape;
  std::vector<double> x, dlogits;
};

/// Builds `model` for the batch with `patterns` frozen (none: nothing frozen), runs one
/// train-mode forward and backward, gradients starting at 0 for trainable parameters and at
/// kUntouched for frozen ones, then an eval-mode forward.
Pass run(kiln::Model& model, const std::vector<std::string>& patterns, const Batch& batch) {
  kiln::ModelBuildContext ctx;
  ctx.backend = &cpu();
  ctx.max_batch = batch.shape[0];
  ctx.seed = 7;
  if (!patterns.empty()) ctx.frozen = [&](std::string_view name) { return matches(patterns, std::string(name)); };
  model.build(ctx);
  const auto params = model.parameters();
  Pass pass;
  for (const kiln::Parameter& p : params) {
    const bool frozen = (p.flags & kiln::kParamFrozen) != 0;
    pass.frozen.push_back(frozen);
    cpu().fill(p.grad, frozen ? kUntouched : 0.0);
  }
  const kiln::Tensor input = kiln::test::device_f32(batch.shape, batch.x);
  const kiln::Tensor logits = model.forward(input, kiln::Mode::train, 1);
  pass.logits = kiln::test::read(logits);
  const kiln::Tensor d = kiln::test::device_f32(logits.shape(), batch.dlogits);
  pass.reported.assign(params.size(), 0);
  model.backward(d, [&](std::size_t i) { ++pass.reported.at(i); });
  cpu().synchronize();
  for (const kiln::Parameter& p : params) pass.grads.push_back(kiln::test::read(p.grad));
  pass.eval_logits = kiln::test::read(model.forward(input, kiln::Mode::eval, 1));
  return pass;
}

bool left_alone(const std::vector<double>& v) {
  for (double x : v) {
    if (x != kUntouched) return false;
  }
  return true;
}

/// What a frozen parameter's gradient must look like after backward.
enum class Untouched { weights, all };

/// Compares a frozen run with the unfrozen `reference` of the same model: trainable gradients
/// equal bit for bit and reported once; the frozen ones marked, and left alone as `untouched` says
/// (a "weight" is any parameter outside batch-norm layers, whose names contain "bn" or
/// "downsample.1").
void check(const std::vector<std::string>& names, const Pass& reference, const Pass& frozen,
           const std::vector<std::string>& patterns, Untouched untouched) {
  BOOST_TEST((frozen.logits == reference.logits), "train-mode logits differ");
  BOOST_TEST((frozen.eval_logits == reference.eval_logits), "eval-mode logits differ");
  std::size_t count = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    // A zero gradient would not show whether a frozen one was computed.
    BOOST_TEST(!left_alone(reference.grads[i]), names[i] << ": its unfrozen gradient equals the sentinel");
    bool nonzero = false;
    for (double g : reference.grads[i]) nonzero = nonzero || g != 0;
    BOOST_TEST(nonzero, names[i] << ": its unfrozen gradient is zero");
    const bool want_frozen = matches(patterns, names[i]);
    BOOST_TEST(frozen.frozen[i] == want_frozen, names[i]);
    if (!want_frozen) {
      BOOST_TEST(frozen.reported[i] == 1, names[i]);
      BOOST_TEST((frozen.grads[i] == reference.grads[i]), names[i] << ": trainable gradient differs");
      continue;
    }
    ++count;
    const bool batch_norm = names[i].find("bn") != std::string::npos || names[i].find("downsample.1") != std::string::npos;
    if (untouched == Untouched::all || !batch_norm) {
      BOOST_TEST(left_alone(frozen.grads[i]), names[i] << ": a frozen gradient was computed");
    }
  }
  BOOST_TEST(count > 0);
}

std::vector<std::string> names_of(const kiln::Model& model) {
  std::vector<std::string> names;
  for (const kiln::Parameter& p : model.parameters()) names.push_back(p.name);
  return names;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(frozen_backward, *boost::unit_test::precondition(kiln::test::cnn_ops_available))

BOOST_AUTO_TEST_CASE(resnet_skips_frozen_work_and_keeps_trainable_gradients) {
  const std::string toml = "depth = 18\nwidth = 0.25\nimage_size = 32\nnum_classes = 5";
  const Batch batch({2, 3, 32, 32}, 5);
  auto plain = kiln::test::make_resnet(toml);
  const Pass reference = run(*plain, {}, batch);
  const auto names = names_of(*plain);

  const struct {
    const char* what;
    std::vector<std::string> patterns;
    Untouched untouched;
    std::size_t prefix_blocks;  // blocks sharing forward buffers as a frozen prefix
  } cases[] = {
      {"linear probe", {"conv1.*", "bn1.*", "layer*"}, Untouched::all, 8},
      {"stem and first two stages", {"conv1.*", "bn1.*", "layer1.*", "layer2.*"}, Untouched::all, 4},
      {"a middle stage between trainable ones", {"layer2.*"}, Untouched::weights, 0},
      {"all but a downsample and the head", {"conv1.*", "bn1.*", "layer1.*", "layer2.*", "layer3.0.conv*",
                                             "layer3.0.bn*", "layer3.1.*", "layer4.*"},
       Untouched::weights, 4},
      {"every convolution and the head (batch-norm only)", {"*conv*", "*downsample.0*", "fc.*"}, Untouched::weights,
       0},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      auto model = kiln::test::make_resnet(toml);
      check(names, reference, run(*model, c.patterns, batch), c.patterns, c.untouched);
      BOOST_TEST(model->frozen_prefix_blocks() == c.prefix_blocks);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(mlp_skips_frozen_work_and_keeps_trainable_gradients) {
  // tanh: with ReLU, units this narrow die on a batch of 4 and leave gradients at zero.
  const std::string toml = "in_features = 6\nhidden = [5, 4, 3]\nnum_classes = 3\ndropout = 0.0\nactivation = \"tanh\"";
  const Batch batch({4, 6}, 3);
  auto plain = kiln::test::make_mlp(toml);
  const Pass reference = run(*plain, {}, batch);
  const auto names = names_of(*plain);

  const struct {
    const char* what;
    std::vector<std::string> patterns;
  } cases[] = {
      {"probe", {"layers.*"}},
      {"input side", {"layers.0.*", "layers.1.*"}},
      {"a middle layer", {"layers.1.*"}},
      {"the head", {"head.*"}},
      {"every weight", {"*.weight"}},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      auto model = kiln::test::make_mlp(toml);
      // No batch-norm: no frozen gradient is ever written.
      check(names, reference, run(*model, c.patterns, batch), c.patterns, Untouched::all);
    }
  }
}
