// Golden test in 16-bit compute: the float64 PyTorch step of resnet_golden.bin (depth 50, width
// 0.03125, 96x96, batch 4; see make_resnet_golden.py) run by Kiln through the real `bf16` and
// `fp16` precision plugins and the trainer's ComputeBoundary (the f32 input cast to the compute
// dtype, the logits back to f32 for the loss, the dlogits down again): f32 masters, the policy's
// cast to compute copies, fp16's loss scale
// (retrying from the same state while the policy skips and halves it, then unscaled gradients).
// Relative error per tensor ||got - want|| / ||want|| against the SAME f64 reference, bounded by
// max(2e-2, 3 x what PyTorch itself reaches for that tensor) -- resnet_mixed_spread.txt, written by
// measure_resnet_mixed.py: the worst over torch.autocast bf16 (bf16 only) and stored-16-bit
// emulations with 16 differently perturbed roundings (CPU torch 1.13 has no f16 conv). Why not
// the issue's flat 2e-2: this narrow, randomly initialised network amplifies rounding ~30x forward
// and ~500x backward (PyTorch's f32 gradients are 6e-4 off), so 16-bit gradients are noise in any
// framework. PyTorch's figures, bf16 | fp16: logits 0.17 | 4.0e-2, loss 2.2e-2 | 4.2e-3, gradients
// median 1.26 | 0.66 and worst 70 | 31, updated params median 5.5e-2 | 3.2e-2 and worst 5.2 | 8.1,
// BN stats median 1.7e-3 | 2.7e-4 and worst 0.13 | 3.0e-2. The gradient norm ratio got/want (PyTorch
// 0.020..70 | 0.15..32) must stay within 3x of those: 0 means never written, >>1 left loss-scaled.
// fp16 is required (fails, never skips) where the backend lacks f16 conv. Label resnet;golden.
#define KILN_TEST_MODULE test_resnet_golden_mixed
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "golden_file.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/precision_policy.hpp"
#include "kiln/train/compute_boundary.hpp"
#include "kiln/train/optimizer.hpp"
#include "nn_fixture.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::DType;
using kiln::Op;
using kiln::test::cpu;
using kiln::test::GoldenArray;

/// The gradient norm ratio ||got|| / ||want|| each policy must keep (PyTorch's range, widened 3x).
struct RatioRange {
  double min, max;
};
constexpr RatioRange kBf16Ratio{0.02 / 3, 70.0 * 3};
constexpr RatioRange kFp16Ratio{0.15 / 3, 32.0 * 3};
/// Floor of every per-tensor bound: the issue's figure.
constexpr double kIssueBound = 2e-2;

/// resnet_mixed_spread.txt: tensor name -> PyTorch's worst relative error, for `policy`.
std::map<std::string, double> load_spread(const std::string& policy) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/golden/resnet_mixed_spread.txt";
  std::ifstream in(path);
  BOOST_TEST_REQUIRE(in.good(), "cannot open " << path << "; run tests/golden/measure_resnet_mixed.py");
  std::map<std::string, double> out;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string who, name;
    double err = -1;
    fields >> who >> name >> err;
    BOOST_TEST_REQUIRE((!fields.fail() && err >= 0), path << ":" << line_no << ": expected '<policy> <tensor> <error>'");
    if (who == policy) out[name] = err;
  }
  BOOST_TEST_REQUIRE(!out.empty(), path << " has no lines for " << policy << "; rerun measure_resnet_mixed.py");
  return out;
}

std::shared_ptr<kiln::PrecisionPolicy> make_policy(const std::string& name, const std::string& toml_body) {
  const kiln::ParamMap params = kiln::test::plugin_params(KILN_KIND_PRECISION, name, toml_body);
  kiln::PluginArgs args;
  args.params = &params;
  const auto& info = kiln::test::registry().require(KILN_KIND_PRECISION, name, "precision");
  return kiln::test::registry().create_precision(info, args);
}

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

double norm_ratio(const std::vector<double>& got, const std::vector<double>& want) {
  double a = 0, b = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    a += got[i] * got[i];
    b += want[i] * want[i];
  }
  return std::sqrt(a) / std::max(std::sqrt(b), 1e-30);
}

/// Compares one category's tensors: each error must be <= max(2e-2, 3 x PyTorch's). Logs the
/// median, the three worst tensors, and the tensor closest to its bound.
class Checker {
 public:
  Checker(std::string policy, std::map<std::string, double> spread)
      : policy_(std::move(policy)), spread_(std::move(spread)) {}

  void add(const std::string& key, const std::vector<double>& got, const std::vector<double>& want) {
    BOOST_TEST_REQUIRE(got.size() == want.size(), policy_ << " " << key << ": size differs");
    const auto it = spread_.find(key);
    BOOST_TEST_REQUIRE((it != spread_.end()), "resnet_mixed_spread.txt has no " << policy_ << " line for '" << key
                                                                                << "'; rerun measure_resnet_mixed.py");
    const double bound = std::max(kIssueBound, 3.0 * it->second);
    const double err = relative_error(got, want);
    BOOST_TEST(err <= bound, policy_ << " " << key << ": relative error " << err << " > " << bound
                                     << " (PyTorch reaches " << it->second << ")");
    errors_.emplace_back(err, key);
    if (err / bound > closest_) {
      closest_ = err / bound;
      closest_key_ = key;
    }
  }

  /// Logs the category `what` gathered since the last call and starts the next one.
  void log(const std::string& what) {
    BOOST_TEST_REQUIRE(!errors_.empty());
    std::sort(errors_.begin(), errors_.end());
    std::ostringstream line;
    line << policy_ << " " << what << " (" << errors_.size() << "): median " << errors_[errors_.size() / 2].first
         << ", worst";
    for (std::size_t i = errors_.size(); i-- > 0 && i + 3 >= errors_.size();) {
      line << " " << errors_[i].second << " " << errors_[i].first;
    }
    line << "; closest to its bound: " << closest_key_ << " at " << closest_ << " of it";
    BOOST_TEST_MESSAGE(line.str());
    errors_.clear();
    closest_ = 0;
  }

 private:
  std::string policy_;
  std::map<std::string, double> spread_;
  std::vector<std::pair<double, std::string>> errors_;
  double closest_ = 0;
  std::string closest_key_;
};

/// The golden step under precision plugin `policy_name` ([precision] keys `toml_body`): builds
/// the model in the policy's dtypes, copies the golden weights into the f32 masters, and repeats
/// the step from the same state (zeroed gradients, initial BN statistics) while the policy says
/// skip, as the trainer would with its next batch. Returns the loss scales the policy used.
std::vector<float> run_golden_step(const std::string& policy_name, const std::string& toml_body,
                                   const RatioRange& ratios) {
  const auto golden = kiln::test::load_golden("resnet_golden.bin", "make_resnet_golden.py");
  auto at = [&](const std::string& name) -> const GoldenArray& {
    const auto it = golden.find(name);
    BOOST_TEST_REQUIRE((it != golden.end()), "resnet_golden.bin has no array '" << name << "'");
    return it->second;
  };
  const GoldenArray& input = at("input");
  const std::int64_t B = input.shape.at(0), K = at("logits").shape.at(1);

  const auto policy = make_policy(policy_name, toml_body);
  try {
    policy->check_backend(cpu());
  } catch (const kiln::Error& e) {
    BOOST_FAIL("the " << policy_name << " policy refuses the cpu backend: " << e.what());
  }
  auto model = kiln::test::make_resnet("depth = 50\nwidth = 0.03125\nnum_classes = 10\nimage_size = 96");
  kiln::ModelBuildContext ctx;
  ctx.backend = &cpu();
  ctx.param_dtype = policy->param_dtype();
  ctx.compute_dtype = policy->compute_dtype();
  ctx.max_batch = B;
  ctx.seed = 7;
  model->build(ctx);
  const auto params = model->parameters();
  BOOST_TEST_REQUIRE((params.front().compute.dtype() == policy->compute_dtype()));
  for (const auto& p : params) {
    const GoldenArray& w = at(p.name);
    BOOST_TEST_REQUIRE(p.value.shape() == w.shape, p.name << " shape differs from PyTorch's");
    kiln::test::write(p.value, w.values);
  }
  std::vector<std::vector<double>> initial_stats;
  for (const auto& b : model->buffers()) initial_stats.push_back(kiln::test::read(b.value));

  kiln::nn::SoftmaxCrossEntropy xent;
  xent.build(cpu(), B, K);
  kiln::Tensor labels_host = kiln::host_tensor({B}, DType::i32);
  for (std::int64_t i = 0; i < B; ++i) {
    labels_host.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(at("labels").values[static_cast<std::size_t>(i)]);
  }
  kiln::Tensor labels = cpu().allocate({B}, DType::i32, kiln::MemoryKind::device);
  cpu().copy(labels_host, labels);
  const kiln::Tensor x = kiln::test::device_f32(input.shape, input.values);
  // The model computes in the compute dtype only; these are the casts the trainer makes around it.
  kiln::train::ComputeBoundary boundary;
  boundary.build(cpu(), policy->compute_dtype(), model->input_spec(), B, "resnet");

  std::vector<float> scales;
  std::vector<double> logits, loss;
  for (;;) {
    BOOST_TEST_REQUIRE(scales.size() < 32u, policy_name << ": the policy kept skipping without a NumericError");
    for (std::size_t i = 0; i < initial_stats.size(); ++i) kiln::test::write(model->buffers()[i].value, initial_stats[i]);
    model->store().zero_grads(cpu());
    policy->before_forward(cpu(), params);
    const kiln::Tensor out = boundary.logits(model->forward(boundary.input(x), kiln::Mode::train, 0));
    logits = kiln::test::read(out);
    xent.reset_totals();
    xent.forward(out, labels, B);
    scales.push_back(policy->loss_scale());
    model->backward(boundary.dlogits(xent.backward(scales.back() / static_cast<float>(B))), nullptr);
    if (policy->after_allreduce(cpu(), params) == kiln::StepDecision::apply) break;
  }
  loss = {xent.totals().first / static_cast<double>(B)};
  std::ostringstream used;
  for (float s : scales) used << " " << s;
  BOOST_TEST_MESSAGE(policy_name << ": loss scales used" << used.str());

  Checker check(policy_name, load_spread(policy_name));
  check.add("logits", logits, at("logits").values);
  check.log("logits");
  check.add("loss", loss, at("loss").values);
  check.log("loss");

  double min_ratio = 1e300, max_ratio = 0;
  for (const auto& p : params) {
    const auto g = kiln::test::read(p.grad);
    const auto& want = at("grad." + p.name).values;
    check.add("grad." + p.name, g, want);
    const double ratio = norm_ratio(g, want);
    BOOST_TEST((ratio >= ratios.min && ratio <= ratios.max),
               policy_name << " grad." << p.name << ": norm ratio got/want " << ratio << " outside [" << ratios.min
                           << ", " << ratios.max << "]");
    min_ratio = std::min(min_ratio, ratio);
    max_ratio = std::max(max_ratio, ratio);
  }
  check.log("gradients");
  BOOST_TEST_MESSAGE(policy_name << " gradient norm ratio got/want in [" << min_ratio << ", " << max_ratio << "]");
  for (const auto& b : model->buffers()) check.add(b.name, kiln::test::read(b.value), at(b.name).values);
  check.log("BN running statistics");

  auto table = kiln::config::Config::parse("[optimizer]\nlr = 0.1\nmomentum = 0.9\nweight_decay = 1e-4\n",
                                           "golden.toml", {})
                   .validate("optimizer", kiln::train::optimizer_schema("sgd"));
  auto sgd = kiln::train::make_optimizer("sgd", table);
  sgd->step(cpu(), params, 0.1f);
  cpu().synchronize();
  for (const auto& p : params) check.add("sgd." + p.name, kiln::test::read(p.value), at("sgd." + p.name).values);
  check.log("updated parameters");
  return scales;
}

boost::test_tools::assertion_result bf16_cnn_ops(boost::unit_test::test_unit_id id) {
  auto f32 = kiln::test::cnn_ops_available(id);
  if (!f32) return f32;
  if (!cpu().supports(Op::conv2d_forward, DType::bf16) || !cpu().supports(Op::batchnorm_train_forward, DType::bf16)) {
    boost::test_tools::assertion_result r(false);
    r.message() << "the cpu backend has no bf16 convolution/batch norm on this CPU";
    return r;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bf16_one_sgd_step_matches_pytorch_within_bf16_rounding,
                     *boost::unit_test::precondition(bf16_cnn_ops)) {
  // allow_emulated: the numerics, not the speed, are under test (a CPU without avx512_bf16 runs it).
  const auto scales = run_golden_step("bf16", "allow_emulated = true", kBf16Ratio);
  BOOST_TEST(scales == std::vector<float>{1.0f}, "bf16 has no loss scaling and never skips");
}

BOOST_AUTO_TEST_CASE(fp16_one_sgd_step_matches_pytorch_after_loss_scale_backoff,
                     *boost::unit_test::precondition(kiln::test::cnn_ops_available)) {
  // Required, not a precondition: the issue promises fp16 on the cpu backend ("store f16, compute f32").
  BOOST_TEST_REQUIRE(cpu().supports(Op::conv2d_forward, DType::f16),
                     "the cpu backend does not support conv2d_forward in f16; the fp16 policy cannot run ResNet");
  const auto scales = run_golden_step("fp16", "", kFp16Ratio);
  // At 2^16 the activation gradients overflow f16 (PyTorch's emulation: 4 skips, finite at 2^12):
  // the policy must skip and halve, never apply an inf step, and settle within 2^10..2^14.
  BOOST_TEST_REQUIRE(scales.size() >= 2u, "expected the 2^16 start to overflow f16 at least once");
  BOOST_TEST(scales.front() == 65536.0f);
  for (std::size_t i = 1; i < scales.size(); ++i) BOOST_TEST(scales[i] == scales[i - 1] / 2.0f);
  BOOST_TEST(scales.back() >= 1024.0f);
  BOOST_TEST(scales.back() <= 16384.0f);
}
