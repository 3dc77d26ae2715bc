// Synchronised batch-norm end to end on the cuda backend: one optimizer step of a small ResNet-18
// on one GPU with [model] sync_bn = true (the split path: batchnorm_stats, the f64 sums through
// the communicator, batchnorm_infer_forward with the batch's statistics, batchnorm_backward_reduce
// and batchnorm_backward_elemt, all Kiln kernels) ends with the weights and running statistics of
// the same step without it (cuDNN's fused batch-norm), in fp32 (NCHW activations) and bf16 (NHWC).
// With one rank the global batch is the rank's, so the two paths compute the same step; the
// checkpoint's every tensor is compared. The log must say the layers synchronised, so the test
// cannot pass by running the unsplit path twice.
// Labelled `gpu`: without a device it exits 77, which CTest reports as skipped.
#define BOOST_TEST_MODULE test_sync_bn_cuda
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "../integration/checkpoint_tensors.hpp"
#include "../integration/kiln_process.hpp"
#include "../gpu/cuda_device_skip.hpp"

namespace {

namespace fs = std::filesystem;
using Tensors = kiln::test::F32Tensors;
using kiln::test::Difference;

/// A ResNet-18 (width 1/8) on 16 synthetic 32x32 images on the cuda backend: one epoch = one
/// optimizer step of batch 16 at `lr`, checkpointed after it.
std::string config(const std::string& precision, bool sync_bn, const std::string& lr = "0.1") {
  return std::string("[run]\nepochs = 1\n\n[backend]\ntype = \"cuda\"\n\n") +
         "[model]\ntype = \"resnet\"\ndepth = 18\nwidth = 0.125\nnum_classes = 4\nimage_size = 32\n" +
         (sync_bn ? "sync_bn = true\n" : "") +
         "\n[data.train]\ntype = \"synthetic\"\nshape = [3, 32, 32]\nclasses = 4\ncount = 16\n\n"
         "[loader]\nbatch = 16\nworkers = 1\n\n[precision]\ntype = \"" +
         precision + "\"\n\n[optimizer]\ntype = \"sgd\"\nlr = " + lr + "\n\n[checkpoint]\nevery_epochs = 1\n\n" +
         "[log]\nprogress = \"never\"\n";
}

struct Run {
  fs::path dir;
  Tensors tensors;
};

Run train(const std::string& name, const std::string& precision, bool sync_bn, const std::string& lr = "0.1") {
  const fs::path dir = kiln::test::scratch_dir();
  const fs::path cfg = dir / (name + ".toml"), run = dir / name;
  std::ofstream(cfg) << config(precision, sync_bn, lr);
  const auto r = kiln::test::run_kiln(dir, {"train", "--config", cfg.string(), "--run-dir", run.string()});
  BOOST_TEST_REQUIRE(r.status == 0, name << ": " << r.err);
  return Run{run, kiln::test::read_f32_safetensors(run / "checkpoints" / "epoch-0001" / "model.safetensors")};
}

bool is_running_statistic(const std::string& name) { return name.find("running_") != std::string::npos; }

/// The step's update of every trained tensor: after minus before.
Tensors updates(const Tensors& after, const Tensors& before) {
  Tensors out;
  for (const auto& [name, a] : after) {
    if (is_running_statistic(name)) continue;
    const std::vector<float>& b = before.at(name);
    std::vector<float> d(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    out.emplace(name, std::move(d));
  }
  return out;
}

/// ||a - b|| and ||b|| of one tensor.
std::pair<double, double> distance(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    norm += double{b[i]} * b[i];
  }
  return {diff, norm};
}

void sync_step_matches_plain_step_fp32() {
  const Run plain = train("plain-fp32", "fp32", false);
  const Run synced = train("sync-fp32", "fp32", true);
  BOOST_TEST(kiln::test::slurp(synced.dir / "logs" / "rank0.log").find("sync_bn: 20 batch-norm layers") !=
             std::string::npos);
  BOOST_TEST_REQUIRE(plain.tensors.count("layer1.0.bn1.running_mean") == 1u);
  const Difference all = kiln::test::largest_relative_difference(plain.tensors, synced.tensors);
  const Difference stats = kiln::test::largest_relative_difference(plain.tensors, synced.tensors, "running_");
  BOOST_TEST_MESSAGE("fp32: sync_bn vs cuDNN batch-norm, largest relative difference " << all.worst << " at "
                                                                                     << all.where << "; running statistics "
                                                                                     << stats.worst << " at " << stats.where);
  BOOST_TEST(all.worst <= 1e-4, all.where);
  BOOST_TEST(stats.worst <= 1e-4, stats.where);
}

}  // namespace

// fp32: the two paths differ only in summation order (f64 here, cuDNN's own there) through 20
// layers and one SGD step, as test_sync_bn's 1e-4 on the cpu backend.
BOOST_AUTO_TEST_CASE(fp32_nchw_sync_step_matches_cudnn_batch_norm) { sync_step_matches_plain_step_fp32(); }

// bf16: the two paths cannot be compared with each other element by element. Many batch-norm
// layers feed a convolution and another batch norm, whose mean subtraction cancels a per-channel
// shift, so their beta's gradient is nearly zero and in bf16 mostly rounding: on an H200
// (2026-12-04) cuDNN's bf16 step and the sync_bn step each differed from the fp32 step by 0.69 of
// bn1.bias's norm, and from each other by 0.72 of its RMS at one element. So each path's update
// (weights after minus before, the "before" from a step with lr 1e-30) is measured against the
// fp32 step's update, and the sync_bn path must be about as near it as cuDNN's bf16 path: over
// all trained tensors together (dominated by the real gradients, where a wrong statistic shows),
// and per tensor within twice cuDNN's error plus 0.1. The running statistics are compared with
// cuDNN's directly (0.0099 of a tensor's scale seen).
BOOST_AUTO_TEST_CASE(bf16_nhwc_sync_step_is_as_near_the_fp32_step_as_cudnn_batch_norm) {
  const Run before = train("init", "fp32", false, "1e-30");
  const Run reference = train("reference-fp32", "fp32", false);
  const Run plain = train("plain-bf16", "bf16", false);
  const Run synced = train("sync-bf16", "bf16", true);
  BOOST_TEST(kiln::test::slurp(synced.dir / "logs" / "rank0.log").find("sync_bn: 20 batch-norm layers") !=
             std::string::npos);
  const Tensors want = updates(reference.tensors, before.tensors);
  const Tensors got_plain = updates(plain.tensors, before.tensors);
  const Tensors got_sync = updates(synced.tensors, before.tensors);
  BOOST_TEST_REQUIRE(want.size() > 40u);
  double plain_diff = 0, sync_diff = 0, norm = 0, worst_ratio = 0;
  std::string worst;
  for (const auto& [name, w] : want) {
    const auto [dp, n] = distance(got_plain.at(name), w);
    const auto [ds, n2] = distance(got_sync.at(name), w);
    plain_diff += dp, sync_diff += ds, norm += n;
    const double e_plain = std::sqrt(dp / std::max(n, 1e-300)), e_sync = std::sqrt(ds / std::max(n, 1e-300));
    BOOST_TEST(e_sync <= 2 * e_plain + 0.1, name << ": sync_bn's update is " << e_sync
                                                 << " of the fp32 update's norm away from it, cuDNN bf16's " << e_plain);
    if (e_sync / std::max(e_plain, 1e-12) > worst_ratio) worst_ratio = e_sync / std::max(e_plain, 1e-12), worst = name;
  }
  const double e_plain = std::sqrt(plain_diff / norm), e_sync = std::sqrt(sync_diff / norm);
  const Difference stats = kiln::test::largest_relative_difference(plain.tensors, synced.tensors, "running_");
  BOOST_TEST_MESSAGE("bf16: update vs the fp32 step's, all tensors: cuDNN batch-norm " << e_plain << ", sync_bn " << e_sync
                                                                                     << "; largest per-tensor ratio "
                                                                                     << worst_ratio << " at " << worst
                                                                                     << "; running statistics vs cuDNN's "
                                                                                     << stats.worst << " at " << stats.where);
  BOOST_TEST(e_sync <= 1.5 * e_plain + 1e-3);
  BOOST_TEST(stats.worst <= 2e-2, stats.where);
}

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the cuda sync_bn training test")) return skip;
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
