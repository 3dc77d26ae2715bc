// Golden test: one SGD training step of the `resnet` model (depth 50, width 0.03125, 10 classes,
// 96x96) on the cpu backend against PyTorch's numbers in resnet_golden.bin (written by
// make_resnet_golden.py, which documents the format and checks its network IS torchvision's
// resnet50 at full width): logits, loss, every parameter gradient, the BN running statistics
// after the forward, and every parameter after SGD (momentum 0.9, weight decay 1e-4 except BN
// parameters and biases). The golden weights are copied in, so Kiln's initialisation plays no
// part. The reference is float64. Tolerance, as relative error per tensor ||got - want|| / ||want||:
// 1e-4 (the issue's) for logits, loss and running statistics, and for the median over all
// gradients; each single gradient (and updated parameter) <= 1e-3, because an f32 backward
// through 50 layers of narrow batch norms cannot do better: PyTorch's own f32 run is off this
// reference by up to 4.5e-4 (layer1.0.bn2.weight; median 2.8e-5), measured when the file was made.
// Registered from tests/resnet/CMakeLists.txt (label resnet;golden).
#define KILN_TEST_MODULE test_resnet_golden
#include "kiln_test_main.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "golden_file.hpp"
#include "kiln/config/config.hpp"
#include "kiln/sdk/nn/layers.hpp"
#include "kiln/train/optimizer.hpp"
#include "nn_fixture.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::test::cpu;

using kiln::test::GoldenArray;

std::map<std::string, GoldenArray> load_golden() { return kiln::test::load_golden("resnet_golden.bin", "make_resnet_golden.py"); }

/// Tests ||got - want|| / ||want|| <= tol and returns it.
double compare(const std::string& what, const std::vector<double>& got, const GoldenArray& want, double tol = 1e-4) {
  BOOST_TEST_REQUIRE(got.size() == want.values.size(), what << ": size differs");
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want.values[i]) * (got[i] - want.values[i]);
    norm += want.values[i] * want.values[i];
  }
  const double rel = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  BOOST_TEST(rel <= tol, what << ": relative error " << rel << " > " << tol);
  return rel;
}

}  // namespace

BOOST_AUTO_TEST_CASE(resnet50_narrow_one_sgd_step_matches_pytorch,
                     *boost::unit_test::precondition(kiln::test::cnn_ops_available)) {
  const auto golden = load_golden();
  auto at = [&](const std::string& name) -> const GoldenArray& {
    const auto it = golden.find(name);
    BOOST_TEST_REQUIRE((it != golden.end()), "resnet_golden.bin has no array '" << name << "'");
    return it->second;
  };
  const GoldenArray& input = at("input");
  const std::int64_t B = input.shape.at(0), K = at("logits").shape.at(1);
  BOOST_TEST_REQUIRE(B == 4);
  BOOST_TEST_REQUIRE(K == 10);

  auto model = kiln::test::make_resnet("depth = 50\nwidth = 0.03125\nnum_classes = 10\nimage_size = 96");
  kiln::test::build(*model, B);
  const auto params = model->parameters();
  std::size_t golden_params = 0;
  for (const auto& [name, arr] : golden) golden_params += name.rfind("grad.", 0) == 0 ? 1 : 0;
  BOOST_TEST_REQUIRE(params.size() == golden_params);
  for (const auto& p : params) {
    const GoldenArray& w = at(p.name);
    BOOST_TEST_REQUIRE(p.value.shape() == w.shape, p.name << " shape differs from PyTorch's");
    kiln::test::write(p.value, w.values);
  }
  model->store().zero_grads(cpu());

  kiln::nn::SoftmaxCrossEntropy xent;
  xent.build(cpu(), B, K);
  kiln::Tensor labels_host = kiln::host_tensor({B}, kiln::DType::i32);
  for (std::int64_t i = 0; i < B; ++i) {
    labels_host.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(at("labels").values[static_cast<std::size_t>(i)]);
  }
  kiln::Tensor labels = cpu().allocate({B}, kiln::DType::i32, kiln::MemoryKind::device);
  cpu().copy(labels_host, labels);

  const kiln::Tensor x = kiln::test::device_f32(input.shape, input.values);
  const kiln::Tensor logits = model->forward(x, kiln::Mode::train, 0);
  compare("logits", kiln::test::read(logits), at("logits"));
  xent.reset_totals();
  xent.forward(logits, labels, B);
  compare("loss", {xent.totals().first / static_cast<double>(B)}, at("loss"));

  model->backward(xent.backward(1.0f / static_cast<float>(B)), nullptr);
  std::vector<double> grad_errors;
  for (const auto& p : params) {
    grad_errors.push_back(compare("grad." + p.name, kiln::test::read(p.grad), at("grad." + p.name), 1e-3));
  }
  std::sort(grad_errors.begin(), grad_errors.end());
  const double median = grad_errors[grad_errors.size() / 2];
  BOOST_TEST_MESSAGE("gradient relative error: median " << median << ", worst " << grad_errors.back());
  BOOST_TEST(median <= 1e-4);
  for (const auto& b : model->buffers()) compare(b.name, kiln::test::read(b.value), at(b.name));

  auto table = kiln::config::Config::parse("[optimizer]\nlr = 0.1\nmomentum = 0.9\nweight_decay = 1e-4\n",
                                           "golden.toml", {})
                   .validate("optimizer", kiln::train::optimizer_schema("sgd"));
  auto sgd = kiln::train::make_optimizer("sgd", table);
  sgd->step(cpu(), params, 0.1f);
  cpu().synchronize();
  for (const auto& p : params) compare("sgd." + p.name, kiln::test::read(p.value), at("sgd." + p.name), 1e-3);
}
