// run_length_warnings: the settings a run of run.epochs epochs never reaches (a warmup longer than
// the run, late step milestones, a plateau or early-stopping patience the run cannot outlast,
// histograms every more epochs than it has), each named with its value and origin, and silence
// for the same settings in a run long enough for them.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/run_length_warnings.hpp"

namespace {

std::vector<std::string> warnings(const std::string& toml, std::int64_t epochs) {
  kiln::config::Config cfg = kiln::config::Config::parse(toml, "run.toml", {});
  return kiln::train::run_length_warnings(kiln::train::validate_core_tables(cfg), epochs);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_length_warnings)

BOOST_AUTO_TEST_CASE(a_warmup_longer_than_the_run_says_where_the_rate_ends) {
  const auto w = warnings("[schedule]\ntype = \"cosine\"\nwarmup_epochs = 5\n", 2);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(w[0] == "schedule.warmup_epochs = 5 (run.toml:3) is longer than the run (run.epochs = 2): the rate "
                     "rises for the whole run and ends at 40% of optimizer.lr, never reaching it",
             w[0]);
  BOOST_TEST(warnings("[schedule]\ntype = \"cosine\"\nwarmup_epochs = 5\n", 5).empty());  // reaches it at the end
  BOOST_TEST(warnings("[schedule]\nwarmup_epochs = 0.5\n", 1).empty());
}

BOOST_AUTO_TEST_CASE(step_milestones_at_or_after_the_end_are_named) {
  const std::string toml = "[schedule]\ntype = \"step\"\nmilestones = [1, 3, 30]\n";
  auto w = warnings(toml, 3);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  // Milestone m applies from 0-based epoch m: in a 3-epoch run, 3 never does.
  BOOST_TEST(w[0] == "schedule.milestones = [1, 3, 30] (run.toml:3): milestones 3, 30 come at or after the run's "
                     "end (run.epochs = 3), so the rate is never multiplied by gamma there",
             w[0]);
  w = warnings(toml, 30);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(w[0].find("milestone 30 comes at or after") != std::string::npos, w[0]);
  BOOST_TEST(warnings(toml, 31).empty());
}

BOOST_AUTO_TEST_CASE(a_patience_the_run_cannot_outlast_is_named_with_its_default) {
  // The first epoch sets the best; `patience` more must fail to beat it; acting after the last
  // epoch changes nothing. So patience 3 needs 5 epochs.
  const std::string plateau = "[schedule]\ntype = \"plateau\"\nmetric = \"train_loss\"\npatience = 3\n";
  auto w = warnings(plateau, 4);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(w[0] == "schedule.patience = 3 (run.toml:4): the plateau rule lowers the rate after epoch 4 at the "
                     "earliest, which leaves no epoch of this run (run.epochs = 4) to train at the lower rate; the "
                     "rate stays at optimizer.lr",
             w[0]);
  BOOST_TEST(warnings(plateau, 5).empty());

  const std::string early = "[early_stop]\nmetric = \"train_loss\"\n";
  w = warnings(early, 4);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(w[0] == "early_stop.patience = 3 (default): early stopping ends a run after epoch 4 at the earliest, "
                     "and this one (run.epochs = 4) ends by then anyway, so it never stops early",
             w[0]);
  BOOST_TEST(warnings(early, 5).empty());
  BOOST_TEST(warnings("", 1).empty());  // early stopping off: its default patience says nothing
}

BOOST_AUTO_TEST_CASE(a_patience_on_an_eval_metric_counts_evaluations) {
  // Read every 3 epochs: patience 2 acts after the third reading, epoch 9 at the earliest.
  const std::string toml = "[run]\neval_every_epochs = 3\n[early_stop]\nmetric = \"eval_loss\"\npatience = 2\n";
  auto w = warnings(toml, 9);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(w[0] == "early_stop.patience = 2 (run.toml:5): early stopping ends a run after epoch 9 at the earliest "
                     "(its eval_loss is read every 3 epochs: run.eval_every_epochs), and this one (run.epochs = 9) "
                     "ends by then anyway, so it never stops early",
             w[0]);
  BOOST_TEST(warnings(toml, 10).empty());
  // A training metric is read every epoch whatever eval_every_epochs says.
  BOOST_TEST(warnings("[run]\neval_every_epochs = 3\n[early_stop]\nmetric = \"train_loss\"\npatience = 2\n", 4)
                 .empty());
}

BOOST_AUTO_TEST_CASE(histograms_every_more_epochs_than_the_run_has_are_named) {
  const auto w = warnings("[log]\nhistograms_every_epochs = 3\n", 2);
  BOOST_REQUIRE_EQUAL(w.size(), 1u);
  BOOST_TEST(w[0] == "log.histograms_every_epochs = 3 (run.toml:2): histograms are written after epochs 3, 6, ..., "
                     "so this run (run.epochs = 2) writes none",
             w[0]);
  BOOST_TEST(warnings("[log]\nhistograms_every_epochs = 3\n", 3).empty());
}

BOOST_AUTO_TEST_SUITE_END()
