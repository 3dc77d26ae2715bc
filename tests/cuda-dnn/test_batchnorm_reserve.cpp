// BatchNormReserve (plugins/backend-cuda/dnn/batchnorm_reserve.hpp): when the batch-norm Ex
// backward may read the reserve space its plan holds. Plain C++, no GPU.
#include <boost/test/unit_test.hpp>

#include <string>

#include "dnn/batchnorm_reserve.hpp"

using kiln::cuda::BatchNormReserve;

BOOST_AUTO_TEST_SUITE(batchnorm_reserve)

BOOST_AUTO_TEST_CASE(no_reserve_needed_means_any_backward_is_fine) {
  BatchNormReserve r;
  int x = 0;
  r.set_required(0);
  BOOST_TEST(!r.backward_problem(&x, 0).has_value());  // before any forward, too
  BOOST_TEST(!r.must_grow(0));
}

BOOST_AUTO_TEST_CASE(a_backward_reads_only_the_reserve_of_its_own_forward) {
  BatchNormReserve r;
  int x1 = 0, x2 = 0;
  r.set_required(4096);
  BOOST_TEST(r.must_grow(0));
  BOOST_TEST(r.must_grow(4095));
  BOOST_TEST(!r.must_grow(4096));

  const auto before = r.backward_problem(&x1, 4096);
  BOOST_REQUIRE(before.has_value());
  BOOST_TEST(before->find("no training forward") != std::string::npos);

  r.forward_wrote(&x1);
  BOOST_TEST(!r.backward_problem(&x1, 4096).has_value());
  const auto other = r.backward_problem(&x2, 4096);
  BOOST_REQUIRE(other.has_value());
  BOOST_TEST(other->find("another x") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_mode_change_forgets_the_last_forward) {
  BatchNormReserve r;
  int x = 0;
  r.set_required(4096);  // persistent
  r.forward_wrote(&x);
  const auto other_size = r.backward_problem(&x, 1024);  // the backward fell back to spatial
  BOOST_REQUIRE(other_size.has_value());
  BOOST_TEST(other_size->find("another size") != std::string::npos);

  r.set_required(1024);  // the next forward runs spatial
  BOOST_TEST(r.backward_problem(&x, 1024).has_value());  // its bytes are not written yet
  r.forward_wrote(&x);
  BOOST_TEST(!r.backward_problem(&x, 1024).has_value());
  r.set_required(1024);  // the same size again keeps the record
  BOOST_TEST(!r.backward_problem(&x, 1024).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
