// LrSchedule: constant, cosine, step and linear warmup evaluated at chosen steps against the
// formulas in lr_schedule.hpp, the plateau schedule as the trainer drives it (its rule itself is
// checked against PyTorch in tests/golden/test_plateau_golden.cpp), and the configurations it
// must refuse.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <tuple>

#include "kiln/errors.hpp"
#include "kiln/train/lr_schedule.hpp"
#include "train_fixture.hpp"

namespace {

using kiln::train::LrSchedule;

constexpr double kPi = 3.14159265358979323846;

LrSchedule make(const std::string& type, const std::string& body, double lr, std::int64_t steps_per_epoch,
                std::int64_t epochs) {
  const kiln::ParamMap table = kiln::test::core_table("schedule", body, kiln::train::schedule_schema(type));
  return LrSchedule(type, table, lr, steps_per_epoch, epochs, kiln::train::plateau_options(type, table, true));
}

/// The epoch's numbers with only the train loss set (what the plateau tests watch).
kiln::train::EpochMetrics train_loss(double v) {
  kiln::train::EpochMetrics m;
  m.train_loss = v;
  return m;
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

// PyTorch 1.13's PolynomialLR(total_iters=20, power=2.0) on lr 0.1 gives, stepped once per
// optimizer step, 0.1, 0.09025, 0.081 ... 0.025 at 10, 0.00025 at 19, 0 from 20 on: the closed
// form below (checked with Debian's torch when this was written).
BOOST_AUTO_TEST_CASE(polynomial_decay_matches_pytorchs_polynomial_lr_and_ends_at_min_lr) {
  const auto s = make("polynomial", "power = 2.0", 0.1, 10, 2);
  BOOST_TEST(s.at(0) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(1) == 0.09025, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(2) == 0.081, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(10) == 0.025, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.at(19) == 0.00025, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(s.at(20) == 0.0);
  BOOST_TEST(s.describe() == "polynomial power 2 (warmup 0 steps)");

  // Power 1 (the default) with a warmup and an end rate: Hugging Face's linear schedule, decaying
  // from lr right after the warmup to min_lr one step past the last: t = (step - 5) / 15.
  const auto linear = make("polynomial", "warmup_epochs = 0.5\nmin_lr = 0.01", 0.1, 10, 2);
  BOOST_TEST(linear.at(0) == 0.02, boost::test_tools::tolerance(1e-12));  // warmup: lr * 1/5
  BOOST_TEST(linear.at(5) == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(linear.at(8) == 0.01 + 0.09 * (1.0 - 3.0 / 15.0), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(linear.at(20) == 0.01, boost::test_tools::tolerance(1e-12));
  for (std::int64_t k = 6; k <= 20; ++k) {
    BOOST_TEST(linear.at(k - 1) - linear.at(k) == 0.09 / 15.0, boost::test_tools::tolerance(1e-9));  // straight
  }
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

BOOST_AUTO_TEST_CASE(plateau_lowers_the_rate_after_patience_bad_epochs_under_the_warmup) {
  auto s = make("plateau", "metric = \"train_loss\"\npatience = 2\nfactor = 0.5\nwarmup_epochs = 0.5", 0.1, 10, 9);
  BOOST_TEST(s.describe() == "plateau on train_loss (min): x0.5 after 2 epochs without an improvement > 0.0001, "
                             "cooldown 0, min_lr 0 (warmup 5 steps)");
  BOOST_TEST(s.at(0) == 0.02, boost::test_tools::tolerance(1e-12));  // warmup as for every type
  BOOST_TEST(s.at(9) == 0.1);
  BOOST_TEST(!s.end_epoch(0, train_loss(1.0)));
  BOOST_TEST(!s.end_epoch(1, train_loss(0.99995)));  // better, but not by more than min_delta
  const auto said = s.end_epoch(2, train_loss(1.5));
  BOOST_TEST_REQUIRE(said.has_value());
  BOOST_TEST(*said == "lr 0.1 -> 0.05: train_loss (min) has not improved by more than 0.0001 for 2 epochs; best 1 "
                      "after epoch 1");
  BOOST_TEST(s.at(30) == 0.05);
  BOOST_TEST(s.plateau()->reductions() == 1);

  // A checkpoint's state puts a fresh schedule where this one is: same rate, same counts (one
  // more bad epoch reduces both at once).
  BOOST_TEST(!s.end_epoch(3, train_loss(2.0)));
  auto resumed = make("plateau", "metric = \"train_loss\"\npatience = 2\nfactor = 0.5", 0.1, 10, 9);
  resumed.load_state(s.state());
  BOOST_TEST(resumed.at(40) == 0.05);
  BOOST_TEST(s.end_epoch(4, train_loss(2.0)).has_value());
  BOOST_TEST(resumed.end_epoch(4, train_loss(2.0)).has_value());
  BOOST_TEST(resumed.at(50) == s.at(50));
  BOOST_TEST(s.at(50) == 0.025);

  // The other schedules keep nothing, and ignore a plateau's state.
  auto cosine = make("cosine", "", 0.1, 10, 2);
  BOOST_TEST(cosine.state().empty());
  cosine.load_state(s.state());
  BOOST_TEST(cosine.at(0) == 0.1);
  BOOST_TEST(!cosine.end_epoch(0, train_loss(1.0)));
}

BOOST_AUTO_TEST_CASE(plateau_stops_at_min_lr_and_counts_no_cooldown_epochs) {
  auto s = make("plateau", "metric = \"train_accuracy\"\npatience = 1\nfactor = 0.1\ncooldown = 1\nmin_lr = 0.002",
                0.1, 10, 9);
  kiln::train::EpochMetrics m;
  m.train_accuracy = 0.5;
  BOOST_TEST(!s.end_epoch(0, m));            // the first value is the best
  BOOST_TEST(s.end_epoch(1, m).has_value());  // equal is no improvement: 0.1 -> 0.01
  BOOST_TEST(!s.end_epoch(2, m));            // the cooldown epoch is not counted
  const auto floor = s.end_epoch(3, m);      // 0.01 -> 0.002, not 0.001
  BOOST_TEST_REQUIRE(floor.has_value());
  BOOST_TEST(floor->find("lr 0.01 -> 0.002 (min_lr): train_accuracy (max)") == 0u, *floor);
  BOOST_TEST(s.at(0) == 0.002, boost::test_tools::tolerance(1e-12));
  for (std::int64_t e = 4; e < 9; ++e) BOOST_TEST(!s.end_epoch(e, m));  // nothing left to lower, nothing said
  BOOST_TEST(s.plateau()->reductions() == 2);
}

BOOST_AUTO_TEST_CASE(plateau_with_a_relative_margin_says_so_and_refuses_a_whole_best) {
  // min_delta_mode = "rel" (PyTorch's threshold_mode): 1% of the best, not 0.01. The rule itself
  // is checked against PyTorch in test_plateau_golden.
  auto s = make("plateau", "metric = \"train_loss\"\npatience = 1\nmin_delta = 0.01\nmin_delta_mode = \"rel\"", 0.1,
                10, 9);
  BOOST_TEST(s.describe() == "plateau on train_loss (min): x0.1 after 1 epoch without an improvement > 1% of the best, "
                             "cooldown 0, min_lr 0 (warmup 0 steps)");
  BOOST_TEST(!s.end_epoch(0, train_loss(100.0)));
  BOOST_TEST(!s.end_epoch(1, train_loss(98.9)));  // 1.1% better: an improvement (an absolute 0.01 too)
  const auto said = s.end_epoch(2, train_loss(98.0));  // 0.9% better: not, where an absolute 0.01 would be
  BOOST_TEST_REQUIRE(said.has_value());
  BOOST_TEST(*said == "lr 0.1 -> 0.01: train_loss (min) has not improved by more than 1% of the best for 1 epoch; "
                      "best 98.9 after epoch 2");
  const std::string whole = kiln::test::error_text<kiln::ConfigError>(
      [] { make("plateau", "metric = \"train_loss\"\nmin_delta = 1.0\nmin_delta_mode = \"rel\"", 0.1, 10, 9); });
  BOOST_TEST(whole.find("schedule.min_delta (test.toml:3) = 1 with min_delta_mode = \"rel\" is 100% of the best; a "
                        "relative margin must be below 1") == 0u,
             whole);
  (void)make("plateau", "min_delta = 1.0", 0.1, 10, 9);  // an absolute margin of 1 is a choice, not a mistake
}

BOOST_AUTO_TEST_CASE(a_plateau_state_no_run_could_write_is_refused) {
  auto s = make("plateau", "", 0.1, 10, 2);
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    BOOST_TEST(kiln::test::error_text<kiln::DataError>([&] { s.load_state({{"lr_plateau.scale", bad}}); })
                   .find("lr_plateau.scale = ") == 0u);
  }
}

BOOST_AUTO_TEST_CASE(each_schedule_type_takes_only_its_own_keys) {
  using kiln::test::error_text;
  // Validated against its type's schema, a key of another type is unknown (gamma = 0.5 under
  // cosine would otherwise train with no decay and no word said).
  for (const auto& [type, body, key] : {std::tuple{"cosine", "gamma = 0.5", "gamma"}, {"step", "min_lr = 0.01", "min_lr"},
                                        {"constant", "patience = 3", "patience"}, {"plateau", "milestones = [2]", "milestones"}}) {
    // Captured by value through plain names: clang before 16 cannot capture a structured binding.
    const std::string msg = error_text<kiln::ConfigError>([t = type, b = body] { make(t, b, 0.1, 10, 2); });
    BOOST_TEST(msg.find(std::string("unknown key '") + key + "' in [schedule]") != std::string::npos, msg);
    BOOST_TEST(msg.find("test.toml:2") != std::string::npos, msg);
  }
  // Keys every type reads, and keys of the chosen type, pass.
  (void)make("plateau", "warmup_epochs = 1.0\nmin_lr = 0.01\nfactor = 0.5", 0.1, 10, 2);
  (void)make("step", "warmup_epochs = 1.0\nmilestones = [1]\ngamma = 0.5", 0.1, 10, 2);
  BOOST_TEST(kiln::train::schedule_schema("constant").size() == 1u);
  BOOST_TEST(kiln::train::schedule_schema("plateau").size() == 9u);
  BOOST_TEST(error_text<kiln::ConfigError>([] { (void)kiln::train::schedule_schema("linear"); }) ==
             "schedule.type = 'linear' is not one of constant, cosine, step, plateau, polynomial");
  // The plateau's metric is refused as early stopping's is, naming the key.
  const auto no_eval = [] {
    const kiln::ParamMap t = kiln::test::core_table("schedule", "", kiln::train::schedule_schema("plateau"));
    (void)kiln::train::plateau_options("plateau", t, false);
  };
  BOOST_TEST(error_text<kiln::ConfigError>(no_eval).find(
                 "schedule.metric (default) = \"eval_loss\" needs an eval split, and this run has none") == 0u,
             error_text<kiln::ConfigError>(no_eval));
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("plateau", "factor = 1.0", 0.1, 10, 2); }).find("factor") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_configs_are_rejected) {
  using kiln::test::error_text;
  BOOST_TEST(error_text<kiln::ConfigError>([] { make("linear", "", 0.1, 10, 2); }) ==
             "schedule.type = 'linear' is not one of constant, cosine, step, plateau, polynomial");
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

// 1e300 epochs of warmup overflow the step count; llround would give LLONG_MIN, and the rate
// would jump to its full value at once. Saturated, the warmup simply never ends.
BOOST_AUTO_TEST_CASE(a_warmup_beyond_any_step_count_never_ends) {
  const auto s = make("constant", "warmup_epochs = 1e300", 0.1, 10, 3);
  BOOST_TEST(s.at(0) < 1e-12);
  BOOST_TEST(s.at(29) < 1e-12);
  BOOST_TEST(s.at(29) > 0.0);
}
