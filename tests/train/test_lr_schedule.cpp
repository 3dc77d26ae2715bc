// LrSchedule: constant, cosine, step and linear warmup evaluated at chosen steps against the
// formulas in lr_schedule.hpp, and the configurations it must refuse.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "kiln/errors.hpp"
#include "kiln/train/lr_schedule.hpp"
#include "train_fixture.hpp"

namespace {

using kiln::train::LrSchedule;

constexpr double kPi = 3.14159265358979323846;

LrSchedule make(const std::string& type, const std::string& body, double lr, std::int64_t steps_per_epoch,
                std::int64_t epochs) {
  return LrSchedule(type, kiln::test::core_table("schedule", body, kiln::train::schedule_schema()), lr,
                    steps_per_epoch, epochs);
}

BOOST_AUTO_TEST_CASE(constant_is_flat) {
  const auto s = make("constant", "", 0.05, 10, 3);
  for (std::int64_t step : {0, 1, 15, 29, 100}) BOOST_TEST(s.at(step) == 0.05);
  BOOST_TEST(s.describe() == "constant (warmup 0 steps)");
}

BOOST_AUTO_TEST_CASE(cosine_first_middle_last_and_min_lr) {
  // 20 steps: t = step / 20.
  const auto s = make("cosine", "min_lr = 0.01", 0.1, 10, 2);
  BOOST_TEST(s.at(0) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(10) == 0.055, boost::test_tools::tolerance(1e-12));  // cos(pi/2) = 0: halfway
  const double last = 0.01 + 0.09 * 0.5 * (1 + std::cos(kPi * 19.0 / 20.0));
  BOOST_TEST(s.at(19) == last, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(19) > 0.01);
  BOOST_TEST(s.at(19) < 0.0106);
  BOOST_TEST(s.at(20) == 0.01, boost::test_tools::tolerance(1e-12));  // min_lr once the run is over
  BOOST_TEST(s.at(500) == 0.01, boost::test_tools::tolerance(1e-12));
  for (std::int64_t k = 1; k < 20; ++k) BOOST_TEST(s.at(k) < s.at(k - 1));
  // Default min_lr is 0.
  BOOST_TEST(make("cosine", "", 0.1, 10, 2).at(20) == 0.0);
}

BOOST_AUTO_TEST_CASE(step_milestones_in_epochs) {
  const auto s = make("step", "milestones = [1, 3]\ngamma = 0.5", 0.2, 10, 5);
  BOOST_TEST(s.at(0) == 0.2);
  BOOST_TEST(s.at(9) == 0.2);
  BOOST_TEST(s.at(10) == 0.1);
  BOOST_TEST(s.at(29) == 0.1);
  BOOST_TEST(s.at(30) == 0.05);
  BOOST_TEST(s.at(49) == 0.05);
  // Default gamma 0.1.
  BOOST_TEST(make("step", "milestones = [2]", 1.0, 4, 3).at(8) == 0.1, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(linear_warmup) {
  // 0.5 epochs of 10 steps = 5 warmup steps: lr * (step + 1) / 5, then the schedule.
  const auto c = make("constant", "warmup_epochs = 0.5", 0.1, 10, 2);
  BOOST_TEST(c.at(0) == 0.02, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.at(2) == 0.06, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.at(4) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.at(5) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.describe() == "constant (warmup 5 steps)");

  // Cosine starts its decay after the warmup: t = (step - 5) / 15.
  const auto s = make("cosine", "warmup_epochs = 0.5", 0.1, 10, 2);
  BOOST_TEST(s.at(0) == 0.02, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(5) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(10) == 0.1 * 0.5 * (1 + std::cos(kPi * 5.0 / 15.0)), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(20) == 0.0, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(bad_configs_are_rejected) {
  using kiln::test::error_text;
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("linear", "", 0.1, 10, 2); }) ==
             "schedule.type = 'linear' is not one of constant, cosine, step");
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("constant", "warmup_epochs = -1.0", 0.1, 10, 2); }) ==
             "test.toml:2:17: [schedule] warmup_epochs = -1 is out of range: it must be >= 0");
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("cosine", "min_lr = 0.5", 0.1, 10, 2); }) ==
             "schedule.min_lr (test.toml:2) must be in [0, optimizer.lr = 0.1]");
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("step", "gamma = 0.0", 0.1, 10, 2); }) ==
             "test.toml:2:9: [schedule] gamma = 0 is out of range: it must be > 0");
  // The schema's ranges cover each milestone (and make every float finite).
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("step", "milestones = [-1]", 0.1, 10, 2); }) ==
             "test.toml:2:15: [schedule] milestones[0] = -1 is out of range: it must be >= 0");
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("cosine", "min_lr = nan", 0.1, 10, 2); }) ==
             "test.toml:2:10: [schedule] min_lr = nan is out of range: it must be a finite number");
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("step", "milestones = [3, 1]", 0.1, 10, 2); }) ==
             "schedule.milestones (test.toml:2) must be in increasing order");
  // A wrong type is caught by schema validation, naming the key and its line.
  const std::string wrong_type = error_text<kiln::ConfigError>([] { make("step", "milestones = 3", 0.1, 10, 2); });
  BOOST_TEST(wrong_type.find("milestones") != std::string::npos);
  BOOST_TEST(wrong_type.find("test.toml:2") != std::string::npos);
}

}  // namespace
