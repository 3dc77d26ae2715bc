// The top-5 count of an evaluation (kiln::train::top_k_hits, evaluate.hpp): a label is a hit when
// fewer than k classes rank above it, a tie going to the lower class as argmax and `kiln predict`
// order them.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "kiln/train/evaluate.hpp"

BOOST_AUTO_TEST_SUITE(top_k_hits)

BOOST_AUTO_TEST_CASE(a_label_counts_when_fewer_than_k_classes_rank_above_it) {
  // Three rows of six classes, k = 2.
  const std::vector<float> logits = {
      0, 9, 8, 1, 1, 1,  // label 2: only class 1 above it -> hit
      0, 9, 8, 7, 1, 1,  // label 3: classes 1 and 2 above -> miss
      5, 5, 5, 0, 0, 0,  // label 1 in a tie of 0, 1, 2: class 0 ranks above (lower index) -> hit
  };
  const std::vector<std::int32_t> labels = {2, 3, 1};
  BOOST_TEST(kiln::train::top_k_hits(logits.data(), labels.data(), 3, 6, 2) == 2);
  // Label 2 in the same tie has classes 0 and 1 above it: a miss at k = 2, a hit at k = 3.
  const std::int32_t tied_last[] = {2};
  BOOST_TEST(kiln::train::top_k_hits(logits.data() + 12, tied_last, 1, 6, 2) == 0);
  BOOST_TEST(kiln::train::top_k_hits(logits.data() + 12, tied_last, 1, 6, 3) == 1);
  // k = 1 is top-1 accuracy: no row's label is its argmax (rows 1 and 2 have class 1, row 3 class 0).
  BOOST_TEST(kiln::train::top_k_hits(logits.data(), labels.data(), 3, 6, 1) == 0);
  // Only the first `rows` rows count.
  BOOST_TEST(kiln::train::top_k_hits(logits.data(), labels.data(), 1, 6, 2) == 1);
}

BOOST_AUTO_TEST_SUITE_END()
