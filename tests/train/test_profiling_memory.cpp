// ProfilingBackend's memory line (`kiln train --profile`, docs/profiling.md): where the backend's
// caching allocator reports live bytes (Backend::counters(): "allocator_allocated_mib",
// "allocator_peak_mib", as the cuda backend does), the profile keeps the largest reading at a
// step's start, the largest after an op with that op's row, and the allocator's own peak; a
// backend without those counters (the cpu one) gets no memory line and no JSON object.
#include <boost/test/unit_test.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/profile/profiling_backend.hpp"
#include "../support/alloc_only_backend.hpp"
#include "../support/forwarding_backend.hpp"

namespace {

using namespace kiln;

/// Swallows ops; with `script`, reports an allocator whose live MiB after the i-th op is
/// script[i], and whose peak also saw `transient` MiB more during that op (a workspace).
class AllocatorReportingBackend final : public test::ForwardingBackend {
 public:
  explicit AllocatorReportingBackend(std::vector<double> script, double start, double transient)
      : ForwardingBackend(std::make_shared<test::AllocOnlyBackend>()), script_(std::move(script)),
        live_(start), peak_(start), transient_(transient) {}
  std::map<std::string, double> counters() const override {
    if (script_.empty()) return {};
    return {{"allocator_allocated_mib", live_}, {"allocator_peak_mib", peak_}};
  }

 protected:
  void run_op(std::function<void()>) override {
    if (ops_ < script_.size()) {
      peak_ = std::max(peak_, live_ + transient_);
      live_ = script_[ops_++];
      peak_ = std::max(peak_, live_);
    }
  }

 private:
  std::vector<double> script_;
  std::size_t ops_ = 0;
  double live_, peak_, transient_;
};

BOOST_AUTO_TEST_SUITE(profiling_memory)

BOOST_AUTO_TEST_CASE(keeps_the_largest_live_readings_and_the_op_after_which_they_were_seen) {
  // fill, add, fill: live 30 after the add (the most), a 40 MiB workspace inside the second fill.
  auto inner = std::make_shared<AllocatorReportingBackend>(std::vector<double>{20, 30, 25}, 10, 40);
  profile::ProfilingBackend backend(inner, 0);
  backend.step_begin();
  const Tensor a = backend.allocate({4, 4}, DType::f32, MemoryKind::device);
  backend.fill(a, 1.0);
  backend.add(a, a, a);
  backend.fill(a, 2.0);
  backend.step_end();
  const profile::MemoryReadings& m = backend.profile().memory;
  BOOST_TEST(m.reported);
  BOOST_TEST(m.at_step_start_mib == 10.0);
  BOOST_TEST(m.most_after_op_mib == 30.0);
  BOOST_TEST(m.most_after_op == "add f32");
  BOOST_TEST(m.peak_mib == 70.0);  // 30 live + 40 during the last fill
  const std::string table = profile::format_table(backend.profile(), "test device");
  BOOST_TEST(table.find("memory (the backend's allocator): 10 MiB live at step start, at most 30 MiB after an op "
                        "(after add f32), peak 70 MiB since the start\n") != std::string::npos,
             table);
  const std::string json = profile::to_json(backend.profile(), "test device");
  BOOST_TEST(json.find("\"memory_mib\": {\"at_step_start\": 10, \"most_after_op\": 30, \"most_after_op_row\": "
                       "\"add f32\", \"peak\": 70}, \"ops\": [{") != std::string::npos,
             json);
}

BOOST_AUTO_TEST_CASE(a_backend_without_allocator_counters_gets_no_memory_line) {
  auto inner = std::make_shared<AllocatorReportingBackend>(std::vector<double>{}, 0, 0);
  profile::ProfilingBackend backend(inner, 0);
  backend.step_begin();
  const Tensor a = backend.allocate({4}, DType::f32, MemoryKind::device);
  backend.fill(a, 1.0);
  backend.step_end();
  BOOST_TEST(!backend.profile().memory.reported);
  BOOST_TEST(profile::format_table(backend.profile(), "d").find("memory") == std::string::npos);
  const std::string json = profile::to_json(backend.profile(), "d");
  BOOST_TEST(json.find("memory_mib") == std::string::npos, json);
  BOOST_TEST(json.find("}, \"ops\": [{\"op\": \"fill\"") != std::string::npos, json);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
