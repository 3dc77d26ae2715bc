// The lines `kiln train --dry-run` ends with (core/train/dry_run.hpp), from made-up timings: the
// pace is the steps after the first (which makes plans), the estimates multiply it out, and a
// resumed run with nothing left says so.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "kiln/train/dry_run.hpp"

namespace {

kiln::train::DryRunReport report() {
  kiln::train::DryRunReport r;
  r.step_seconds = {0.5, 0.1, 0.1, 0.1};
  r.steps_per_epoch = 600;
  r.epoch = 1;
  r.epochs_left = 10;
  r.train_loss = 2.30259;
  r.eval_batches = 4;
  r.eval_batches_per_epoch = 100;
  r.eval_seconds = 0.2;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dry_run_summary)

BOOST_AUTO_TEST_CASE(the_pace_leaves_out_the_first_step_and_the_estimates_multiply_it_out) {
  const std::vector<std::string> lines = kiln::train::dry_run_summary(report(), 512.4);
  BOOST_TEST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[0] == "dry run: 4 of 600 optimizer steps of epoch 1 in 800 ms (the first 500 ms, then 100 ms "
                         "each); train loss 2.3026");
  BOOST_TEST(lines[1] == "dry run: 4 of 100 eval batches in 200 ms (50 ms each)");
  // 600 x 0.1 s = 60 s of training + 100 x 0.05 s = 5 s of eval: 65 s an epoch, 650 s for ten.
  BOOST_TEST(lines[2] == "dry run: at that pace an epoch takes about 1 min 5 s (train 1 min 0 s + eval 5 s), the 10 "
                         "epochs to train about 10 min 50 s; peak memory 512 MB on the host");
}

BOOST_AUTO_TEST_CASE(an_eval_every_few_epochs_counts_only_the_evaluated_ones) {
  kiln::train::DryRunReport r = report();
  r.evals_left = 4;  // eval_every_epochs = 3 over 10 epochs: after 3, 6, 9 and the last
  const std::vector<std::string> lines = kiln::train::dry_run_summary(r, 512.4);
  BOOST_TEST_REQUIRE(lines.size() == 3u);
  // 10 x 60 s of training + 4 x 5 s of eval = 620 s.
  BOOST_TEST(lines[2] == "dry run: at that pace an epoch takes about 1 min 5 s (train 1 min 0 s + eval 5 s), the 10 "
                         "epochs (evaluated after 4 of them) to train about 10 min 20 s; peak memory 512 MB on the "
                         "host");
}

BOOST_AUTO_TEST_CASE(with_ema_each_eval_batch_is_timed_twice_and_an_epoch_has_both_passes) {
  kiln::train::DryRunReport r = report();
  r.eval_passes = 2;
  r.eval_seconds = 0.4;  // 4 batches with the weights, 4 with their average: 50 ms each
  const std::vector<std::string> lines = kiln::train::dry_run_summary(r, 512.4);
  BOOST_TEST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(lines[1] ==
             "dry run: 4 of 100 eval batches, twice (the weights and their moving average) in 400 ms (50 ms each)");
  // 60 s of training + 2 x 100 x 0.05 s = 10 s of eval.
  BOOST_TEST(lines[2] == "dry run: at that pace an epoch takes about 1 min 10 s (train 1 min 0 s + eval 10 s), the 10 "
                         "epochs to train about 11 min 40 s; peak memory 512 MB on the host");
}

BOOST_AUTO_TEST_CASE(the_checkpoint_it_wrote_has_a_line_of_its_own) {
  kiln::train::DryRunReport r = report();
  r.checkpoint_seconds = 0.41;
  r.checkpoint_mb = 204.71;
  const std::vector<std::string> lines = kiln::train::dry_run_summary(r, 512);
  BOOST_TEST_REQUIRE(lines.size() == 4u);
  BOOST_TEST(lines[2] == "dry run: a checkpoint of 204.7 MB written in 410 ms (checkpoints/dry-run, not kept)");
}

BOOST_AUTO_TEST_CASE(device_memory_one_step_no_eval_and_nothing_left_to_train) {
  kiln::train::DryRunReport r = report();
  r.step_seconds = {0.25};
  r.eval_batches = 0;
  r.epochs_left = 0;
  r.epoch = 4;
  r.device_peak_mib = 2048;
  r.steps_per_epoch = 50000;  // 12500 s: hours and minutes
  const std::vector<std::string> lines = kiln::train::dry_run_summary(r, 100);
  BOOST_TEST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[0] == "dry run: 1 of 50000 optimizer steps of epoch 4 in 250 ms; train loss 2.3026");
  // One step is the warm-up alone: the estimate says it overstates.
  BOOST_TEST(lines[1] == "dry run: at that pace an epoch takes about 3 h 28 min (paced by the one step, which makes the "
                         "plans: an overestimate; --dry-run-steps 3 or more paces by the steps after it) (train 3 h "
                         "28 min), but the checkpoint holds every epoch of the run: it has nothing left to train; peak "
                         "memory 100 MB on the host, 2048 MiB on the device");
}

BOOST_AUTO_TEST_SUITE_END()
