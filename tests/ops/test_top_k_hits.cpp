// Backend::top_k_hits on the cpu backend (the per-epoch top-5 accuracy's count): a label is a hit
// when fewer than k classes rank above it, a tie going to the lower class as argmax and
// `kiln predict` order them; a NaN label logit never counts; the count accumulates; a label
// outside [0, K) and a k below 1 are errors. (Every backend runs the same rules through
// `kiln plugins test`'s conformance case top_k_hits.)
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu_fixture.hpp"
#include "kiln/errors.hpp"

using namespace kiln;
using kiln::test::cpu;

namespace {

Tensor labels_tensor(const std::vector<std::int32_t>& values) {
  Tensor t = host_tensor({static_cast<std::int64_t>(values.size())}, DType::i32);
  for (std::size_t i = 0; i < values.size(); ++i) t.data_as<std::int32_t>()[i] = values[i];
  return t;
}

/// The count top_k_hits adds for these rows of six classes.
float hits(const Tensor& logits, const std::vector<std::int32_t>& labels, std::int64_t k) {
  Tensor count = test::f32_tensor({1}, {0.0f});
  cpu().top_k_hits(count, logits, labels_tensor(labels), k);
  return count.data_as<float>()[0];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(top_k_hits)

BOOST_AUTO_TEST_CASE(a_label_counts_when_fewer_than_k_classes_rank_above_it) {
  const Tensor three_rows = test::f32_tensor({3, 6}, {
      0, 9, 8, 1, 1, 1,  // label 2: only class 1 above it -> hit at k = 2
      0, 9, 8, 7, 1, 1,  // label 3: classes 1 and 2 above -> miss at k = 2
      5, 5, 5, 0, 0, 0,  // label 1 in a tie of 0, 1, 2: class 0 ranks above (lower index) -> hit
  });
  BOOST_TEST(hits(three_rows, {2, 3, 1}, 2) == 2.0f);
  // Label 2 in the same tie has classes 0 and 1 above it: a miss at k = 2, a hit at k = 3.
  const Tensor tie = three_rows.rows(2, 1);
  BOOST_TEST(hits(tie, {2}, 2) == 0.0f);
  BOOST_TEST(hits(tie, {2}, 3) == 1.0f);
  // k = 1 is top-1 accuracy: no row's label is its argmax (rows 1 and 2 have class 1, row 3 class 0).
  BOOST_TEST(hits(three_rows, {2, 3, 1}, 1) == 0.0f);
  BOOST_TEST(hits(three_rows, {1, 1, 0}, 1) == 3.0f);
  // k >= K counts every row.
  BOOST_TEST(hits(three_rows, {0, 0, 5}, 6) == 3.0f);
  BOOST_TEST(hits(three_rows, {0, 0, 5}, 50) == 3.0f);
}

BOOST_AUTO_TEST_CASE(a_nan_label_logit_never_counts_and_the_count_accumulates) {
  const float nan = std::nanf("");
  // A NaN compares false with everything, so without the rule no class would rank above it.
  const Tensor logits = test::f32_tensor({2, 6}, {0, 1, nan, 3, 4, 5, 0, 1, 2, 3, 4, nan});
  BOOST_TEST(hits(logits, {2, 4}, 6) == 1.0f);  // row 0's label is NaN; row 1's NaN is another class
  BOOST_TEST(hits(logits, {2, 4}, 1) == 1.0f);  // row 1: NaN does not rank above 4
  Tensor count = test::f32_tensor({1}, {7.0f});
  cpu().top_k_hits(count, logits, labels_tensor({3, 4}), 2);  // row 0: 4 and 5 above -> miss
  BOOST_TEST(count.data_as<float>()[0] == 8.0f);
}

BOOST_AUTO_TEST_CASE(bad_labels_and_k_are_errors_naming_them) {
  const Tensor logits = test::f32_tensor({2, 6}, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  Tensor count = test::f32_tensor({1}, {0.0f});
  std::string msg = test::error_text<BackendError>([&] { cpu().top_k_hits(count, logits, labels_tensor({1, 6}), 5); });
  BOOST_TEST(msg.find("labels[1] = 6 is outside [0, 6)") != std::string::npos, msg);
  msg = test::error_text<BackendError>([&] { cpu().top_k_hits(count, logits, labels_tensor({1, 2}), 0); });
  BOOST_TEST(msg.find("k = 0 must be at least 1") != std::string::npos, msg);
  msg = test::error_text<BackendError>([&] { cpu().top_k_hits(count, logits, labels_tensor({1}), 5); });
  BOOST_TEST(msg.find("labels is i32(1) but must have shape (2)") != std::string::npos, msg);
  BOOST_TEST(count.data_as<float>()[0] == 0.0f);  // nothing counted by a refused call
}

BOOST_AUTO_TEST_SUITE_END()
