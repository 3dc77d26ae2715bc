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

#include <fstream>

#include "../integration/checkpoint_tensors.hpp"
#include "../integration/kiln_process.hpp"
#include "../gpu/cuda_device_skip.hpp"

namespace {

namespace fs = std::filesystem;
using Tensors = kiln::test::F32Tensors;
using kiln::test::Difference;

/// A ResNet-18 (width 1/8) on 16 synthetic 32x32 images on the cuda backend: one epoch = one
/// optimizer step of batch 16, checkpointed after it.
std::string config(const std::string& precision, bool sync_bn) {
  return std::string("[run]\nepochs = 1\n\n[backend]\ntype = \"cuda\"\n\n") +
         "[model]\ntype = \"resnet\"\ndepth = 18\nwidth = 0.125\nnum_classes = 4\nimage_size = 32\n" +
         (sync_bn ? "sync_bn = true\n" : "") +
         "\n[data.train]\ntype = \"synthetic\"\nshape = [3, 32, 32]\nclasses = 4\ncount = 16\n\n"
         "[loader]\nbatch = 16\nworkers = 1\n\n[precision]\ntype = \"" +
         precision + "\"\n\n[optimizer]\ntype = \"sgd\"\nlr = 0.1\n\n[checkpoint]\nevery_epochs = 1\n\n"
         "[log]\nprogress = \"never\"\n";
}

struct Run {
  fs::path dir;
  Tensors tensors;
};

Run train(const std::string& name, const std::string& precision, bool sync_bn) {
  const fs::path dir = kiln::test::scratch_dir();
  const fs::path cfg = dir / (name + ".toml"), run = dir / name;
  std::ofstream(cfg) << config(precision, sync_bn);
  const auto r = kiln::test::run_kiln(dir, {"train", "--config", cfg.string(), "--run-dir", run.string()});
  BOOST_TEST_REQUIRE(r.status == 0, name << ": " << r.err);
  return Run{run, kiln::test::read_f32_safetensors(run / "checkpoints" / "epoch-0001" / "model.safetensors")};
}

void sync_step_matches_plain_step(const std::string& precision, double tolerance) {
  const Run plain = train("plain-" + precision, precision, false);
  const Run synced = train("sync-" + precision, precision, true);
  BOOST_TEST(kiln::test::slurp(synced.dir / "logs" / "rank0.log").find("sync_bn: 20 batch-norm layers") !=
             std::string::npos);
  BOOST_TEST_REQUIRE(plain.tensors.count("layer1.0.bn1.running_mean") == 1u);
  const Difference all = kiln::test::largest_relative_difference(plain.tensors, synced.tensors);
  const Difference stats = kiln::test::largest_relative_difference(plain.tensors, synced.tensors, "running_");
  BOOST_TEST_MESSAGE(precision << ": sync_bn vs cuDNN batch-norm, largest relative difference " << all.worst << " at "
                               << all.where << "; running statistics " << stats.worst << " at " << stats.where);
  BOOST_TEST(all.worst <= tolerance, all.where);
  BOOST_TEST(stats.worst <= tolerance, stats.where);
}

}  // namespace

// fp32: the two paths differ only in summation order (f64 here, cuDNN's own there) through 20
// layers and one SGD step, as test_sync_bn's 1e-4 on the cpu backend.
BOOST_AUTO_TEST_CASE(fp32_nchw_sync_step_matches_cudnn_batch_norm) { sync_step_matches_plain_step("fp32", 1e-4); }

// bf16: activations are rounded to bf16 (8 bits) after every layer, so the paths' outputs can
// differ by a rounding of y and dx wherever their f32 results straddle one; after one step that
// is well under 2e-2 of a tensor's scale, while a wrong statistic or gradient moves it by more.
BOOST_AUTO_TEST_CASE(bf16_nhwc_sync_step_matches_cudnn_batch_norm) { sync_step_matches_plain_step("bf16", 2e-2); }

int main(int argc, char** argv) {
  if (const int skip = kiln::test::skip_without_cuda_device("the cuda sync_bn training test")) return skip;
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
