// The conformance suite instantiated for `local` (world 1) and `gloo` with each algorithm.
// bcube runs only where Gloo's bcube is defined: world sizes that are powers of bcube_base
// (2 here: 1, 2, 4, 8), because every step exchanges within full groups of base ranks; other
// sizes are refused at connect() (tested in test_gloo_failures.cpp).
#include <boost/test/unit_test.hpp>
#include <fmt/format.h>

#include "comm_conformance.hpp"

namespace kiln::test {
namespace {

const std::vector<DType> kFloatTypes = {DType::f32, DType::f64, DType::bf16, DType::f16};

CommSpec gloo(const std::string& algorithm) {
  // fmt rather than operator+ chains, which trip GCC 12's false -Wrestrict warning.
  return CommSpec{"gloo", fmt::format("algorithm = \"{}\"\ninterface = \"lo\"", algorithm),
                  fmt::format("gloo {}", algorithm), kFloatTypes};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conformance)

BOOST_AUTO_TEST_CASE(local_world_1) {
  check_conformance(CommSpec{"local", "", "local", kFloatTypes}, 1);
}

// One named test case per (algorithm, world), e.g. conformance/gloo_ring_world_4, so a failure
// and `--run_test=` name it directly (BOOST_DATA_TEST_CASE would call them _0.._5).
#define KILN_GLOO_CONFORMANCE(algorithm, world) \
  BOOST_AUTO_TEST_CASE(gloo_##algorithm##_world_##world) { check_conformance(gloo(#algorithm), world); }

KILN_GLOO_CONFORMANCE(ring, 1)
KILN_GLOO_CONFORMANCE(ring, 2)
KILN_GLOO_CONFORMANCE(ring, 3)
KILN_GLOO_CONFORMANCE(ring, 4)
KILN_GLOO_CONFORMANCE(ring, 5)
KILN_GLOO_CONFORMANCE(ring, 8)
KILN_GLOO_CONFORMANCE(ring_chunked, 1)
KILN_GLOO_CONFORMANCE(ring_chunked, 2)
KILN_GLOO_CONFORMANCE(ring_chunked, 3)
KILN_GLOO_CONFORMANCE(ring_chunked, 4)
KILN_GLOO_CONFORMANCE(ring_chunked, 5)
KILN_GLOO_CONFORMANCE(ring_chunked, 8)
KILN_GLOO_CONFORMANCE(halving_doubling, 1)
KILN_GLOO_CONFORMANCE(halving_doubling, 2)
KILN_GLOO_CONFORMANCE(halving_doubling, 3)
KILN_GLOO_CONFORMANCE(halving_doubling, 4)
KILN_GLOO_CONFORMANCE(halving_doubling, 5)
KILN_GLOO_CONFORMANCE(halving_doubling, 8)
KILN_GLOO_CONFORMANCE(bcube, 1)
KILN_GLOO_CONFORMANCE(bcube, 2)
KILN_GLOO_CONFORMANCE(bcube, 4)
KILN_GLOO_CONFORMANCE(bcube, 8)

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
