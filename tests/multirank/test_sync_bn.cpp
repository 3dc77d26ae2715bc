// Synchronised batch-norm ([model] sync_bn, core/train/sync_batch_norm.hpp): one optimizer step
// of a small ResNet-18 on 2 gloo ranks x batch 8 with sync_bn = true ends with the same weights
// and the same batch-norm running statistics as 1 rank x batch 16 (the step's gradients are the
// only thing that moved the weights, so equal weights mean equal gradients); with sync_bn off the
// same 2-rank step differs (each rank normalised with its own 8 samples), which shows the
// comparison can see the difference. Also 2 ranks x 1 image (one value per channel and rank in
// layer4) against 1 x 2, and the two configuration refusals.
// Compared: every tensor of the epoch-1 checkpoint's model.safetensors (parameters and buffers).
#define KILN_TEST_MODULE test_sync_bn
#include "kiln_test_main.hpp"

#include <fstream>

#include "../integration/checkpoint_tensors.hpp"
#include "../integration/kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using Tensors = kiln::test::F32Tensors;
using kiln::test::Difference;

/// A ResNet-18 (width 1/8) on 16 synthetic 32x32 images, one epoch = one optimizer step of the
/// global batch 16, checkpointed after it.
std::string config(int per_rank_batch, int global_batch, bool sync_bn) {
  return std::string("[run]\nepochs = 1\n\n[backend]\ntype = \"cpu\"\nthreads = 1\n\n") +
         "[model]\ntype = \"resnet\"\ndepth = 18\nwidth = 0.125\nnum_classes = 4\nimage_size = 32\n" +
         (sync_bn ? "sync_bn = true\n" : "") +
         "\n[data.train]\ntype = \"synthetic\"\nshape = [3, 32, 32]\nclasses = 4\ncount = " +
         std::to_string(global_batch) + "\n\n" +
         "[loader]\nbatch = " + std::to_string(per_rank_batch) + "\nworkers = 1\n\n" +
         "[optimizer]\ntype = \"sgd\"\nlr = 0.1\n\n" + (per_rank_batch < global_batch ? "[comm]\ntype = \"gloo\"\n\n" : "") +
         "[checkpoint]\nevery_epochs = 1\n\n[log]\nprogress = \"never\"\n";
}

struct Run {
  fs::path dir;
  Tensors tensors;
};

Run train(const std::string& name, int nproc, bool sync_bn, int global_batch = 16) {
  const fs::path dir = kiln::test::scratch_dir();
  const fs::path cfg = dir / (name + ".toml"), run = dir / name;
  std::ofstream(cfg) << config(global_batch / nproc, global_batch, sync_bn);
  std::vector<std::string> args = {"train", "--config", cfg.string(), "--run-dir", run.string()};
  if (nproc > 1) args.insert(args.end(), {"--nproc", std::to_string(nproc)});
  const auto r = kiln::test::run_kiln(dir, args);
  BOOST_TEST_REQUIRE(r.status == 0, name << ": " << r.err);
  return Run{run, kiln::test::read_f32_safetensors(run / "checkpoints" / "epoch-0001" / "model.safetensors")};
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_ranks_with_sync_bn_step_like_one_rank_of_the_global_batch) {
  const Run one = train("one-rank", 1, false);
  const Run synced = train("two-ranks-sync", 2, true);
  const Run unsynced = train("two-ranks-local", 2, false);

  BOOST_TEST(kiln::test::slurp(synced.dir / "logs" / "rank1.log").find("sync_bn: 20 batch-norm layers") !=
             std::string::npos);
  BOOST_TEST_REQUIRE(one.tensors.count("layer1.0.bn1.running_mean") == 1u);

  const Difference with_sync = kiln::test::largest_relative_difference(one.tensors, synced.tensors);
  const Difference stats_with_sync = kiln::test::largest_relative_difference(one.tensors, synced.tensors, "running_");
  const Difference without_sync = kiln::test::largest_relative_difference(one.tensors, unsynced.tensors);
  const Difference stats_without_sync = kiln::test::largest_relative_difference(one.tensors, unsynced.tensors, "running_");
  BOOST_TEST_MESSAGE("1 x 16 vs 2 x 8 with sync_bn: largest relative difference " << with_sync.worst << " at "
                                                                                  << with_sync.where);
  BOOST_TEST_MESSAGE("1 x 16 vs 2 x 8 without sync_bn: largest relative difference " << without_sync.worst << " at "
                                                                                     << without_sync.where);
  BOOST_TEST_MESSAGE("running statistics: " << stats_with_sync.worst << " with sync_bn, " << stats_without_sync.worst
                                             << " without");
  // Float tolerance: the same sums taken in another order (two halves added in f64 against one
  // pass), through 20 layers and one SGD step.
  BOOST_TEST(with_sync.worst <= 1e-4, with_sync.where);
  BOOST_TEST(stats_with_sync.worst <= 1e-4, stats_with_sync.where);
  // Without it each rank's BN saw 8 samples: the weights and rank 0's running statistics (what
  // the checkpoint holds) are those of another computation, far outside that tolerance.
  BOOST_TEST(without_sync.worst > 1e-2, without_sync.where);
  BOOST_TEST(stats_without_sync.worst > 1e-2, stats_without_sync.where);
}

BOOST_AUTO_TEST_CASE(one_sample_per_rank) {
  // 2 ranks x 1 image: layer4's 1x1 maps give each rank one value per channel, which plain
  // batch-norm refuses; synchronised, each layer sees the global batch's two. Batch-norm over two
  // values is ill-conditioned backwards (its output is +-1 whatever x, so dx is rounding noise),
  // so the comparison with 1 x 2 is made on the forward's running statistics.
  const Run one = train("one-rank-of-2", 1, false, 2);
  const Run synced = train("two-ranks-of-1", 2, true, 2);
  const Difference stats = kiln::test::largest_relative_difference(one.tensors, synced.tensors, "running_");
  BOOST_TEST_MESSAGE("1 x 2 vs 2 x 1 with sync_bn: running statistics differ by " << stats.worst << " at "
                                                                                   << stats.where);
  BOOST_TEST(stats.worst <= 1e-4, stats.where);

  const fs::path dir = kiln::test::scratch_dir();
  std::ofstream(dir / "plain-of-1.toml") << config(1, 2, false);
  const auto plain = kiln::test::run_kiln(dir, {"train", "--config", (dir / "plain-of-1.toml").string(), "--run-dir",
                                                (dir / "plain-of-1").string(), "--nproc", "2"});
  BOOST_TEST(plain.status != 0);
  BOOST_TEST(plain.err.find("value per channel; training needs at least 2") != std::string::npos, plain.err);
}

BOOST_AUTO_TEST_CASE(sync_bn_refused_without_batch_norm_and_with_partial_last_batch) {
  const fs::path dir = kiln::test::scratch_dir();
  const fs::path cfg = dir / "mlp.toml";
  std::ofstream(cfg) << "[run]\nepochs = 1\n\n[backend]\ntype = \"cpu\"\n\n"
                        "[model]\ntype = \"mlp\"\nsync_bn = true\n\n"
                        "[data.train]\ntype = \"synthetic\"\nshape = [784]\nclasses = 10\ncount = 16\n\n"
                        "[loader]\nbatch = 8\n\n[log]\nprogress = \"never\"\n";
  const auto no_bn = kiln::test::run_kiln(dir, {"train", "--config", cfg.string(), "--run-dir", (dir / "r1").string()});
  // Found when the model is built, after the banner: the last line names the key and the model.
  BOOST_TEST(no_bn.status == 1);
  BOOST_TEST(no_bn.err.find("kiln: error: model.sync_bn (" + cfg.string() + ":9): sync_bn = true, but model 'mlp' has "
                            "no batch-norm layer that synchronises") != std::string::npos,
             no_bn.err);

  const auto partial = kiln::test::run_kiln(dir, {"train", "--config", cfg.string(), "--run-dir", (dir / "r2").string(),
                                                  "--set", "loader.last_batch=\"partial\""});
  const std::string line2 = kiln::test::one_line_error(partial);
  BOOST_TEST(line2.find("sync_bn = true cannot be combined with last_batch = \"partial\"") != std::string::npos, line2);
}
