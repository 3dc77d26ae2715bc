// Entry point of test_backend_conformance: every op of kiln/backend.hpp on one backend plugin,
// checked against float64 references, in f32, bf16 and f16 and both image layouts. The suite
// itself is in the core (core/cli/backend_suite/, also run by `kiln plugins test`); this
// executable runs it as Boost test cases for Kiln's own backends.
//
// The backend is named after `--` (`test_backend_conformance -- cuda`), else by
// KILN_CONFORMANCE_BACKEND, else "cpu". It is made before Boost.Test starts so that a CUDA
// backend on a machine without a GPU exits 77 (CTest's SKIP_RETURN_CODE: reported Skipped,
// never Passed); any other failure to make it is an error. Cases are then registered per dtype
// and layout, skipped (with the reason) where supports() says no.
#define BOOST_TEST_MODULE backend_conformance
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#ifdef KILN_CONFORMANCE_CUDART
#include "../gpu/cuda_device_skip.hpp"
#endif

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "backend_under_test.hpp"
#include "cli/backend_suite/suite.hpp"

namespace {

std::string backend_name(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return argv[i + 1];
  }
  if (const char* env = std::getenv("KILN_CONFORMANCE_BACKEND"); env && *env) return env;
  return "cpu";
}

/// 0 if a CUDA device is usable (or CUDA is not involved), else prints why and returns 77.
int cuda_device_check(const std::string& name) {
  if (name != "cuda") return 0;
#ifdef KILN_CONFORMANCE_CUDART
  return kiln::test::skip_without_cuda_device("the cuda backend conformance suite");
#else
  return 0;
#endif
}

bool init_conformance() {
  init_unit_test();  // BOOST_TEST_MODULE's: names the master suite
  kiln::conformance::add_suite_cases();
  return true;
}

}  // namespace

// Every op of the contract (KILN_OPS) is required in f32: models refuse to build on a backend
// that lacks one, so a gap here is a gap for users.
BOOST_AUTO_TEST_CASE(every_op_supported_in_f32) {
  auto& b = kiln::conformance::backend_under_test();
  for (const kiln::Op op : kiln::kAllOps) {
    BOOST_TEST(b.supports(op, kiln::DType::f32),
               b.name() << " backend: supports(" << kiln::op_name(op) << ", f32) is false; every op is required in f32");
  }
  const kiln::DeviceInfo info = b.device();
  BOOST_TEST_MESSAGE("backend " << b.name() << " on " << info.name << " (" << info.detail << "); activation layout "
                                << kiln::conformance::layout_label(b.activation_layout(kiln::DType::f32)) << " f32, "
                                << kiln::conformance::layout_label(b.activation_layout(kiln::DType::bf16)) << " bf16");
}

// The judge itself: host rounding ties to even, nhwc byte order, and a poisoned (NaN) result
// never passes, so a backend cannot pass by writing nothing.
BOOST_AUTO_TEST_CASE(harness_self_check) {
  using namespace kiln::conformance;
  BOOST_TEST(round_to(kiln::DType::bf16, 1.0 + std::ldexp(1.0, -8)) == 1.0);  // tie -> even
  BOOST_TEST(round_to(kiln::DType::bf16, 1.0 + 3 * std::ldexp(1.0, -8)) == 1.0 + std::ldexp(1.0, -6));
  BOOST_TEST(round_to(kiln::DType::f16, 1.0 + std::ldexp(1.0, -11)) == 1.0);
  BOOST_TEST(round_to(kiln::DType::f16, 1.0 + std::ldexp(1.0, -10)) == 1.0 + std::ldexp(1.0, -10));

  // Logical (N=1, C=2, H=1, W=2) = [c0: 1 2 | c1: 3 4] sits channels-last as 1 3 2 4.
  const kiln::Tensor bytes = encode({1, 2, 3, 4}, {1, 2, 1, 2}, kiln::DType::f32, kiln::Layout::nhwc);
  const float* p = bytes.data_as<float>();
  BOOST_TEST((p[0] == 1.0f && p[1] == 3.0f && p[2] == 2.0f && p[3] == 4.0f));
  BOOST_TEST((decode(bytes, {1, 2, 1, 2}, kiln::Layout::nhwc) == std::vector<double>{1, 2, 3, 4}));

  const auto nan = decode(poison_image({3}, kiln::DType::bf16), {3}, kiln::Layout::row_major);
  BOOST_TEST(std::isinf(relative_error(nan, {1, 2, 3})));
  BOOST_TEST(relative_error({1, 2, 2}, {1, 2, 3}) == 1.0 / std::sqrt(14.0), boost::test_tools::tolerance(1e-12));
}

int main(int argc, char** argv) {
  const std::string name = backend_name(argc, argv);
  if (const int skip = cuda_device_check(name); skip != 0) return skip;
  try {
    kiln::conformance::make_backend_under_test(name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAILED: cannot make backend '%s': %s\n", name.c_str(), e.what());
    return 1;
  }
  std::printf("backend conformance suite: backend '%s'\n", name.c_str());
  return boost::unit_test::unit_test_main(&init_conformance, argc, argv);
}
