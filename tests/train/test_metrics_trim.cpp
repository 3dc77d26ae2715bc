// Resuming drops the metrics.jsonl records of epochs after the checkpoint, so each epoch appears
// once; everything else in the file is kept byte for byte.
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
  BOOST_TEST(kiln::io::drop_metrics_after_epoch(file, 2) == 2);
  BOOST_TEST(slurp(file) == kept);
  BOOST_TEST(kiln::io::drop_metrics_after_epoch(file, 2) == 0);  // nothing left to drop
  BOOST_TEST(slurp(file) == kept);
  fs::remove(file);
  BOOST_TEST(kiln::io::drop_metrics_after_epoch(file, 2) == 0);  // no file: none made
  BOOST_TEST(!fs::exists(file));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
