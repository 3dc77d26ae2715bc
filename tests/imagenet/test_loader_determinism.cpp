// The `imagenet` source under the core DataLoader: the same run seed gives byte-identical
// batches with 1 and 4 decode workers (all randomness comes from the per-sample seed).
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "fixtures.hpp"
#include "kiln/backend.hpp"
#include "kiln/data/data_loader.hpp"
#include "../support/alloc_only_backend.hpp"

namespace {

// Every batch of two epochs, inputs and labels concatenated as bytes.
std::vector<unsigned char> run_epochs(const std::shared_ptr<kiln::DataSource>& source, int workers) {
  kiln::test::AllocOnlyBackend backend;
  kiln::data::LoaderOptions options;
  options.shard.count = source->describe().count;
  options.shard.batch = 4;
  options.shard.seed = 2024;
  options.workers = workers;
  options.prefetch = 2;
  kiln::data::DataLoader loader(source, &backend, options);
  std::vector<unsigned char> all;
  for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    while (auto batch = loader.next()) {
      const auto* in = static_cast<const unsigned char*>(batch->inputs.data());
      all.insert(all.end(), in, in + batch->inputs.bytes());
      const auto* lab = static_cast<const unsigned char*>(batch->labels.data());
      all.insert(all.end(), lab, lab + batch->labels.bytes());
    }
  }
  return all;
}

}  // namespace

BOOST_AUTO_TEST_CASE(loader_batches_are_identical_with_1_and_4_workers) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / fmt::format("kiln-imagenet-loader-{}", ::getpid());
  for (int i = 0; i < 12; ++i) {
    kiln_test::write_file(root / "train" / fmt::format("n{:03d}", i % 3) / fmt::format("{:02d}.JPEG", i),
                          kiln_test::gradient_jpeg(120 + 17 * i, 260 - 9 * i));
  }
  auto source = kiln_test::make_source(fmt::format("root = \"{}\"\nsize = 64\n", root.string()));
  const auto one = run_epochs(source, 1);
  const auto four = run_epochs(source, 4);
  BOOST_TEST(one.size() == 2u * 3u * 4u * (3u * 64u * 64u * 4u + 4u));
  BOOST_TEST((one == four));
  fs::remove_all(root);
}
