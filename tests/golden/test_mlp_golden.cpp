// Golden test: one training step of the `mlp` plugin (12 -> 8 relu -> 5) on the cpu backend,
// with SoftmaxCrossEntropy (scale 1/B = mean loss) and Adam, against PyTorch's numbers in
// mlp_golden.bin (written by make_mlp_golden.py, which documents the format).
//
// The golden weights are copied into each Parameter::value, so Kiln's own initialisation plays
// no part. Tolerance: relative error <= 1e-5 against max(|want|, 1e-2 * max|tensor|): an f32 sum
// of terms much larger than its result (a bias gradient summing +-dlogits) carries rounding noise
// that scales with the terms, not with the near-zero result.
#define KILN_TEST_MODULE test_mlp_golden
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "golden_file.hpp"
#include "kiln/config/config.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/train/optimizer.hpp"
#include "../nn/nn_fixture.hpp"

namespace {

using kiln::test::cpu;

using kiln::test::GoldenArray;

std::map<std::string, GoldenArray> load_golden() { return kiln::test::load_golden("mlp_golden.bin", "make_mlp_golden.py"); }

void compare(const std::string& what, const std::vector<double>& got, const GoldenArray& want) {
  BOOST_TEST_REQUIRE(got.size() == want.values.size(), what << ": size differs");
  double max_abs = 0;
  for (double v : want.values) max_abs = std::max(max_abs, std::abs(v));
  int bad = 0;
  std::ostringstream report;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double scale = std::max(std::abs(want.values[i]), 1e-2 * max_abs);
    const double rel = std::abs(got[i] - want.values[i]) / scale;
    if (!(rel <= 1e-5)) {
      if (bad < 5) report << " [" << i << "] got " << got[i] << " want " << want.values[i] << ";";
      ++bad;
    }
  }
  BOOST_TEST(bad == 0, what << ": " << bad << " of " << got.size() << " elements off by more than 1e-5:"
                            << report.str());
}

BOOST_AUTO_TEST_CASE(mlp_forward_backward_adam_match_pytorch) {
  const auto golden = load_golden();
  auto at = [&](const std::string& name) -> const GoldenArray& {
    const auto it = golden.find(name);
    BOOST_TEST_REQUIRE((it != golden.end()), "mlp_golden.bin has no array '" << name << "'");
    return it->second;
  };
  const GoldenArray& input = at("input");
  const std::int64_t B = input.shape.at(0), F = input.shape.at(1);
  const std::int64_t K = at("logits").shape.at(1);
  BOOST_TEST_REQUIRE(B == 6);
  BOOST_TEST_REQUIRE(F == 12);
  BOOST_TEST_REQUIRE(K == 5);

  auto model = kiln::test::make_mlp("in_features = 12\nhidden = [8]\nactivation = \"relu\"\n"
                                    "dropout = 0.0\nnum_classes = 5\n");
  kiln::ModelBuildContext ctx;
  ctx.backend = &cpu();
  ctx.max_batch = B;
  ctx.seed = 1;
  model->build(ctx);
  const auto params = model->parameters();
  BOOST_TEST_REQUIRE(params.size() == 4u);
  for (const auto& p : params) {
    const GoldenArray& w = at(p.name);
    BOOST_TEST_REQUIRE(p.value.shape() == w.shape, p.name << " shape differs from PyTorch's");
    kiln::test::write(p.value, w.values);
    cpu().fill(p.grad, 0.0);
  }

  kiln::nn::SoftmaxCrossEntropy xent;
  xent.build(cpu(), B, K);
  kiln::Tensor labels_host = kiln::host_tensor({B}, kiln::DType::i32);
  for (std::int64_t i = 0; i < B; ++i) {
    labels_host.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(at("labels").values[static_cast<std::size_t>(i)]);
  }
  kiln::Tensor labels = cpu().allocate({B}, kiln::DType::i32, kiln::MemoryKind::device);
  cpu().copy(labels_host, labels);

  const kiln::Tensor x = kiln::test::device_f32({B, F}, input.values);
  const kiln::Tensor logits = model->forward(x, kiln::Mode::train, 0);
  compare("logits", kiln::test::read(logits), at("logits"));

  xent.reset_totals();
  xent.forward(logits, labels, B);
  const double mean_loss = xent.totals().first / static_cast<double>(B);
  compare("loss", {mean_loss}, at("loss"));

  std::size_t reported = 0;
  model->backward(xent.backward(1.0f / static_cast<float>(B)), [&](std::size_t) { ++reported; });
  BOOST_TEST(reported == params.size());
  for (const auto& p : params) compare("grad." + p.name, kiln::test::read(p.grad), at("grad." + p.name));

  auto table = kiln::config::Config::parse("[optimizer]\nlr = 1e-2\n", "golden.toml", {})
                   .validate("optimizer", kiln::train::optimizer_schema("adam"));
  auto adam = kiln::train::make_optimizer("adam", table);
  adam->step(cpu(), params, 1e-2f);
  cpu().synchronize();
  for (const auto& p : params) compare("adam." + p.name, kiln::test::read(p.value), at("adam." + p.name));
}

}  // namespace
