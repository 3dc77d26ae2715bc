// Resuming drops the metrics.jsonl records written after the checkpoint, so each epoch and each
// step record appears once; everything else in the file is kept byte for byte.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "kiln/io/metrics_trim.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

BOOST_AUTO_TEST_SUITE(metrics_trim)

BOOST_AUTO_TEST_CASE(records_after_the_checkpoint_epoch_and_a_torn_last_line_are_dropped) {
  const fs::path file = fs::temp_directory_path() / ("kiln-trim-" + std::to_string(::getpid()) + ".jsonl");
  const std::string kept =
      "{\"epoch\": 1, \"split\": \"train\"}\n{\"epoch\": 1, \"split\": \"test\"}\n"
      "not json, kept\n{\"epoch\": 2, \"split\": \"train\"}\n";
  std::ofstream(file, std::ios::binary) << kept << "{\"epoch\": 3, \"split\": \"train\"}\n{\"epoch\": 3, \"spl";
  // These records have no "step": their epoch places them.
  BOOST_TEST(kiln::io::drop_metrics_after(file, 2, 0) == 2);
  BOOST_TEST(slurp(file) == kept);
  BOOST_TEST(kiln::io::drop_metrics_after(file, 2, 0) == 0);  // nothing left to drop
  BOOST_TEST(slurp(file) == kept);
  fs::remove(file);
  BOOST_TEST(kiln::io::drop_metrics_after(file, 2, 0) == 0);  // no file: none made
  BOOST_TEST(!fs::exists(file));
}

// [log] every_steps records ("split": "train_step") carry their own step; epoch records the step
// count at the epoch's end. The step decides, so a checkpoint taken within an epoch (at step 6
// of epoch 2 here) keeps that epoch's step records up to it.
BOOST_AUTO_TEST_CASE(step_records_are_dropped_by_their_step) {
  const fs::path file = fs::temp_directory_path() / ("kiln-trim-steps-" + std::to_string(::getpid()) + ".jsonl");
  const std::string epoch1 =
      "{\"wall_time\": 1.5, \"epoch\": 1, \"step\": 2, \"split\": \"train_step\", \"loss\": null}\n"
      "{\"wall_time\": 2.5, \"epoch\": 1, \"step\": 4, \"split\": \"train_step\"}\n"
      "{\"wall_time\": 2.6, \"epoch\": 1, \"step\": 4, \"split\": \"train\"}\n"
      "{\"wall_time\": 2.7, \"epoch\": 1, \"step\": 4, \"split\": \"test\"}\n";
  const std::string step6 = "{\"wall_time\": 3.5, \"epoch\": 2, \"step\": 6, \"split\": \"train_step\"}\n";
  const std::string later =
      "{\"wall_time\": 4.5, \"epoch\": 2, \"step\": 8, \"split\": \"train_step\"}\n"
      "{\"wall_time\": 4.6, \"epoch\": 2, \"step\": 8, \"split\": \"train\"}\n";
  std::ofstream(file, std::ios::binary) << epoch1 << step6 << later;
  BOOST_TEST(kiln::io::drop_metrics_after(file, 1, 6) == 2);  // a checkpoint at step 6, within epoch 2
  BOOST_TEST(slurp(file) == epoch1 + step6);
  BOOST_TEST(kiln::io::drop_metrics_after(file, 1, 4) == 1);  // the checkpoint after epoch 1
  BOOST_TEST(slurp(file) == epoch1);
  fs::remove(file);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
