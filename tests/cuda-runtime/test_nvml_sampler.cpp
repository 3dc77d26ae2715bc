// NvmlSampler without a driver: a missing library means no counters and no error; a fake NVML
// library checks symbol resolution, the device lookup by PCI bus id and the reported values.
#define BOOST_TEST_MODULE cuda_nvml_sampler
#include <boost/test/unit_test.hpp>

#include <string>

#include "nvml/nvml_sampler.hpp"

namespace {
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

BOOST_AUTO_TEST_CASE(a_missing_library_gives_no_counters_and_no_error) {
  kiln::cuda::NvmlSampler sampler("0000:19:00.0", "libkiln-no-such-nvml.so.1");
  BOOST_TEST(!sampler.available());
  BOOST_TEST(contains(sampler.unavailable_reason(), "dlopen libkiln-no-such-nvml.so.1 failed"),
             sampler.unavailable_reason());
  BOOST_TEST(sampler.sample().empty());
}

BOOST_AUTO_TEST_CASE(the_fake_library_reports_utilisation_and_memory) {
  kiln::cuda::NvmlSampler sampler("0000:19:00.0", KILN_FAKE_NVML);
  BOOST_REQUIRE_MESSAGE(sampler.available(), sampler.unavailable_reason());
  const auto counters = sampler.sample();
  BOOST_TEST(counters.size() == 3u);
  BOOST_TEST(counters.at("utilisation_pct") == 42.0);
  BOOST_TEST(counters.at("memory_used_mib") == 1024.0);
  BOOST_TEST(counters.at("memory_total_mib") == 81920.0);
  BOOST_TEST(sampler.sample() == counters);  // within 0.5 s: the cached sample
}

BOOST_AUTO_TEST_CASE(a_device_nvml_does_not_know_is_reported_not_thrown) {
  kiln::cuda::NvmlSampler sampler("0000:AA:00.0", KILN_FAKE_NVML);
  BOOST_TEST(!sampler.available());
  BOOST_TEST(sampler.unavailable_reason() == "nvmlDeviceGetHandleByPciBusId_v2(0000:AA:00.0): Not Found");
  BOOST_TEST(sampler.sample().empty());
}
