// NCCL plugin logic that needs no GPU: every ncclResult_t has a sentence and a hint, the CUDA
// errors a communicator meets have specific hints, ScopedEnv pins and restores NCCL_ALGO, the
// NCCL_ALGO values pin all-reduce only, and the device checks.
#define BOOST_TEST_MODULE nccl_errors
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <set>
#include <string>

#include "nccl_algo.hpp"
#include "nccl_errors.hpp"
#include "scoped_env.hpp"

using namespace kiln::nccl;

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_CASE(every_nccl_result_has_a_sentence_and_a_hint) {
  std::set<std::string> names;
  for (int code = 0; code < static_cast<int>(ncclNumResults); ++code) {
    const ErrorText t = nccl_error_text(static_cast<ncclResult_t>(code));
    BOOST_TEST(t.name != "unknown", "code " << code);
    BOOST_TEST(!t.meaning.empty(), "code " << code);
    BOOST_TEST(t.hint.size() > 10u, "code " << code);
    names.insert(std::string(t.name));
  }
  BOOST_TEST(names.size() == static_cast<std::size_t>(ncclNumResults));  // no copy-paste duplicates
  BOOST_TEST(nccl_error_text(ncclSystemError).name == "ncclSystemError");
  BOOST_TEST(nccl_error_text(ncclInvalidUsage).name == "ncclInvalidUsage");
  BOOST_TEST(nccl_error_text(ncclRemoteError).name == "ncclRemoteError");
}

BOOST_AUTO_TEST_CASE(system_error_message_names_the_call_and_how_to_see_more) {
  const std::string msg = format_nccl_error("ncclCommInitRankConfig(rank 1 of 4)", ncclSystemError);
  BOOST_TEST(msg == "ncclCommInitRankConfig(rank 1 of 4) failed: ncclSystemError (2): a system call failed; rerun "
                    "with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see which (often a socket, shared memory in "
                    "/dev/shm, or a network interface: set NCCL_SOCKET_IFNAME)");
}

BOOST_AUTO_TEST_CASE(detail_from_nccl_is_appended) {
  const std::string msg = format_nccl_error("enqueue", ncclInvalidArgument, "Invalid root 7");
  BOOST_TEST(contains(msg, "enqueue failed: ncclInvalidArgument (4): an argument passed to NCCL is invalid; "));
  BOOST_TEST(contains(msg, " [NCCL: Invalid root 7]"));
  BOOST_TEST(contains(format_nccl_error("x", ncclInvalidUsage), "same collectives in the same order"));
  BOOST_TEST(contains(format_nccl_error("x", ncclRemoteError), "other ranks' logs"));
}

BOOST_AUTO_TEST_CASE(unknown_codes_say_so_with_the_number) {
  const std::string msg = format_nccl_error("ncclAllReduce", static_cast<ncclResult_t>(42));
  BOOST_TEST(msg == "ncclAllReduce failed: unknown (42): NCCL returned a result code this build does not know; check "
                    "that the NCCL library loaded at run time matches the nccl.h Kiln was built with");
}

BOOST_AUTO_TEST_CASE(cuda_errors_get_specific_hints) {
  const std::string no_driver = format_cuda_error("cudaGetDeviceCount", cudaErrorInsufficientDriver,
                                                  "cudaErrorInsufficientDriver",
                                                  "CUDA driver version is insufficient for CUDA runtime version");
  BOOST_TEST(no_driver == "cudaGetDeviceCount failed: cudaErrorInsufficientDriver (35): CUDA driver version is "
                          "insufficient for CUDA runtime version; the NVIDIA driver is missing or older than this "
                          "CUDA runtime; on a machine without a GPU use a CPU communicator such as gloo");
  BOOST_TEST(contains(std::string(cuda_error_hint(cudaErrorInvalidDevice)), "the backend's device (backend.device"));
  BOOST_TEST(contains(std::string(cuda_error_hint(cudaErrorNoDevice)), "CUDA_VISIBLE_DEVICES"));
  BOOST_TEST(contains(std::string(cuda_error_hint(cudaErrorIllegalAddress)), "CUDA_LAUNCH_BLOCKING=1"));
  BOOST_TEST(contains(std::string(cuda_error_hint(cudaErrorMemoryAllocation)), "out of memory"));
  BOOST_TEST(contains(std::string(cuda_error_hint(static_cast<cudaError_t>(9999))), "CUDA runtime documentation"));
}

BOOST_AUTO_TEST_CASE(scoped_env_sets_and_restores_a_previous_value) {
  ::setenv("KILN_TEST_NCCL_ALGO", "Tree", 1);
  {
    ScopedEnv e("KILN_TEST_NCCL_ALGO", "Ring");
    BOOST_TEST(std::string(std::getenv("KILN_TEST_NCCL_ALGO")) == "Ring");
    BOOST_REQUIRE(e.previous().has_value());
    BOOST_TEST(*e.previous() == "Tree");
  }
  BOOST_TEST(std::string(std::getenv("KILN_TEST_NCCL_ALGO")) == "Tree");
  ::unsetenv("KILN_TEST_NCCL_ALGO");
}

BOOST_AUTO_TEST_CASE(scoped_env_unsets_what_was_unset) {
  ::unsetenv("KILN_TEST_NCCL_ALGO");
  {
    ScopedEnv e("KILN_TEST_NCCL_ALGO", "Ring");
    BOOST_TEST(!e.previous().has_value());
    BOOST_TEST(std::string(std::getenv("KILN_TEST_NCCL_ALGO")) == "Ring");
  }
  BOOST_TEST(std::getenv("KILN_TEST_NCCL_ALGO") == nullptr);
}

BOOST_AUTO_TEST_CASE(env_default_keeps_the_users_value) {
  ::setenv("KILN_TEST_NCCL_DEBUG", "INFO", 1);
  BOOST_TEST(!set_env_default("KILN_TEST_NCCL_DEBUG", "WARN"));
  BOOST_TEST(std::string(std::getenv("KILN_TEST_NCCL_DEBUG")) == "INFO");
  ::unsetenv("KILN_TEST_NCCL_DEBUG");
  BOOST_TEST(set_env_default("KILN_TEST_NCCL_DEBUG", "WARN"));
  BOOST_TEST(std::string(std::getenv("KILN_TEST_NCCL_DEBUG")) == "WARN");
  ::unsetenv("KILN_TEST_NCCL_DEBUG");
}

// Tree implements only all-reduce: a bare NCCL_ALGO=Tree leaves broadcast and all-gather without an
// algorithm on two or more ranks. The pinned values name the function (NCCL >= 2.24 syntax), and
// never a bare "Tree".
BOOST_AUTO_TEST_CASE(nccl_algo_pins_all_reduce_only) {
  BOOST_TEST(*algo_env_value(Algo::tree, 22803) == "allreduce:tree");
  BOOST_TEST(*algo_env_value(Algo::ring, 22803) == "allreduce:ring");
  BOOST_TEST(*algo_env_value(Algo::tree, kPerFunctionAlgoVersion) == "allreduce:tree");
  BOOST_TEST(*algo_env_value(Algo::ring, 22400) == "allreduce:ring");
  BOOST_TEST(*algo_env_value(Algo::tree, 30000) == "allreduce:tree");
  // Before 2.24: ring implements every collective, so a bare Ring is safe; tree is refused.
  BOOST_TEST(*algo_env_value(Algo::ring, 22304) == "Ring");
  BOOST_TEST(!algo_env_value(Algo::tree, 22304).has_value());
  BOOST_TEST(!algo_env_value(Algo::tree, 22399).has_value());
  for (int version : {21903, 22304, 22400, 22803}) {
    for (Algo algo : {Algo::ring, Algo::tree}) {
      const auto v = algo_env_value(algo, version);
      if (v) BOOST_TEST(*v != "Tree", "version " << version);
    }
  }
  BOOST_TEST(std::string(algo_plugin_name(Algo::tree)) == "nccl-tree");
  BOOST_TEST(std::string(algo_display_name(Algo::ring)) == "Ring");
  BOOST_TEST(nccl_version_text(22803) == "2.28.3");
}

BOOST_AUTO_TEST_CASE(device_checks_use_the_backends_device) {
  BOOST_TEST(!device_problem(0, 1).has_value());
  BOOST_TEST(!device_problem(3, 8).has_value());
  BOOST_TEST(*device_problem(1, 1) == "the backend computes on CUDA device 1, but this process sees 1 device(s)");
  BOOST_TEST(device_problem(-1, 4).has_value());
  BOOST_TEST(device_problem(0, 0).has_value());
}
