// softmax cross-entropy forward/backward with and without label smoothing, stats accumulation
// (loss sum and correct count), numerical stability, and label range errors.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <random>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

struct Reference {
  std::vector<double> probs, dlogits;
  double loss = 0;
  int correct = 0;
};

Reference reference(const Tensor& logits, const Tensor& labels, double s, double scale) {
  const std::int64_t b = logits.dim(0), k = logits.dim(1);
  Reference r;
  for (std::int64_t i = 0; i < b; ++i) {
    const float* x = logits.data_as<float>() + i * k;
    const int y = labels.data_as<std::int32_t>()[i];
    double mx = x[0];
    std::int64_t arg = 0;
    for (std::int64_t j = 1; j < k; ++j) {
      if (x[j] > mx) mx = x[j], arg = j;
    }
    double z = 0;
    for (std::int64_t j = 0; j < k; ++j) z += std::exp(x[j] - mx);
    const double lse = mx + std::log(z);
    for (std::int64_t j = 0; j < k; ++j) {
      const double target = (j == y ? 1.0 - s : 0.0) + s / k;
      const double logp = x[j] - lse;
      r.probs.push_back(std::exp(logp));
      r.loss -= target * logp;
      r.dlogits.push_back(scale * (std::exp(logp) - target));
    }
    r.correct += arg == y;
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(softmax_xent)

BOOST_AUTO_TEST_CASE(forward_backward_with_smoothing) {
  std::mt19937 rng(31);
  for (auto [b, k] : {std::pair<std::int64_t, std::int64_t>{64, 10}, {7, 3}, {256, 100}}) {
    for (float s : {0.0f, 0.1f}) {
      Tensor logits = test::random_f32({b, k}, rng, -4.0f, 4.0f);
      Tensor labels = host_tensor({b}, DType::i32);
      std::uniform_int_distribution<int> pick(0, static_cast<int>(k) - 1);
      for (std::int64_t i = 0; i < b; ++i) labels.data_as<std::int32_t>()[i] = pick(rng);
      // Make some rows correct for sure, so the count is not trivially ~B/K.
      for (std::int64_t i = 0; i < b; i += 3) {
        logits.data_as<float>()[i * k + labels.data_as<std::int32_t>()[i]] = 9.0f;
      }
      const double scale = 1.0 / static_cast<double>(b);
      const Reference ref = reference(logits, labels, s, scale);

      Tensor probs = test::poisoned({b, k});
      Tensor stats = test::f32_tensor({2}, {1.5f, 2.0f});  // accumulated into
      cpu().softmax_xent_forward(probs, stats, logits, labels, s);
      const std::string what = "softmax_xent B=" + std::to_string(b) + " s=" + std::to_string(s);
      test::check_close(probs, ref.probs, 1e-5, 1e-7, what + " probs");
      BOOST_TEST(std::abs(stats.data_as<float>()[0] - (1.5 + ref.loss)) <= 1e-5 * (1.5 + ref.loss),
                 what << " loss " << stats.data_as<float>()[0] << " want " << 1.5 + ref.loss);
      BOOST_TEST(stats.data_as<float>()[1] == 2.0f + static_cast<float>(ref.correct), what);

      Tensor dlogits = test::poisoned({b, k});
      cpu().softmax_xent_backward(dlogits, probs, labels, s, static_cast<float>(scale));
      test::check_close(dlogits, ref.dlogits, 1e-5, 1e-8, what + " dlogits");
    }
  }
}

BOOST_AUTO_TEST_CASE(stable_for_huge_logits) {
  Tensor logits = test::f32_tensor({2, 3}, {1000.0f, 0.0f, -1000.0f, -500.0f, -500.0f, 80.0f});
  Tensor labels = host_tensor({2}, DType::i32);
  labels.data_as<std::int32_t>()[0] = 1;
  labels.data_as<std::int32_t>()[1] = 2;
  Tensor probs = test::poisoned({2, 3});
  Tensor stats = test::f32_tensor({2}, {0.0f, 0.0f});
  cpu().softmax_xent_forward(probs, stats, logits, labels, 0.0f);
  BOOST_TEST(probs.data_as<float>()[0] == 1.0f);
  BOOST_TEST(probs.data_as<float>()[5] == 1.0f);
  BOOST_TEST(stats.data_as<float>()[0] == 1000.0f);  // row 0 loses 1000 nats, row 1 ~0
  BOOST_TEST(stats.data_as<float>()[1] == 1.0f);
}

BOOST_AUTO_TEST_CASE(label_out_of_range) {
  Tensor logits = host_tensor({4, 10}, DType::f32);
  Tensor probs = host_tensor({4, 10}, DType::f32);
  Tensor stats = host_tensor({2}, DType::f32);
  Tensor labels = host_tensor({4}, DType::i32);
  for (int i = 0; i < 4; ++i) labels.data_as<std::int32_t>()[i] = i == 3 ? 10 : i;
  std::string msg = test::error_text<BackendError>(
      [&] { cpu().softmax_xent_forward(probs, stats, logits, labels, 0.0f); });
  BOOST_TEST(msg.find("labels[3] = 10 is outside [0, 10)") != std::string::npos, msg);
  Tensor short_labels = host_tensor({3}, DType::i32);
  msg = test::error_text<BackendError>(
      [&] { cpu().softmax_xent_backward(probs, probs, short_labels, 0.0f, 1.0f); });
  BOOST_TEST(msg.find("labels is i32(3) but must have shape (4)") != std::string::npos, msg);
}

BOOST_AUTO_TEST_SUITE_END()
