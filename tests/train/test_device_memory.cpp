// Device memory over whole training runs, counted as a GPU's caching allocator counts it
// (support/live_bytes_backend.hpp: every allocated byte, touched or not, and uploads as device
// copies): a run's peak does not depend on how many epochs it takes. Something allocated per
// step or per epoch and kept (by the trainer, a precision policy, the optimizer, gradient sync,
// evaluation or a model) would grow it with the epochs (once the kept bytes exceed the largest
// transient of the first epoch: two steps and an evaluation later, a kept batch-sized tensor per
// step does) and, on a GPU, run out of memory after enough of them; on the cpu backend it could
// stay invisible to RSS. The MLP in fp32, bf16 and
// fp16 (loss scaling), and a small ResNet-18 in fp32, each evaluated after every epoch.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <memory>
#include <string>

#include "kiln/backend.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/trainer.hpp"
#include "train_fixture.hpp"
#include "../support/live_bytes_backend.hpp"

namespace {

using namespace kiln;
using R = plugin::Registry;

struct Setup {
  std::string precision, precision_body;
  std::string model, model_body;
  std::string data, train_body, eval_body;
};

/// The most device memory alive at once during `epochs` epochs of `s`.
std::size_t peak_over(const Setup& s, int epochs) {
  test::PluginRun run;
  std::shared_ptr<Backend> cpu = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  auto counted = std::make_shared<test::LiveBytesBackend>(cpu);
  run.parts.backend = counted;
  run.parts.precision = run.make(KILN_KIND_PRECISION, s.precision, s.precision_body, &R::create_precision);
  run.parts.model = run.make(KILN_KIND_MODEL, s.model, s.model_body, &R::create_model);
  run.parts.train_data = run.make(KILN_KIND_DATA, s.data, s.train_body, &R::create_data);
  run.parts.eval_data = run.make(KILN_KIND_DATA, s.data, s.eval_body, &R::create_data);
  test::connect_local_comm(run);
  train::TrainerOptions o = test::sgd_trainer_options(epochs, 16, 0.01);
  o.train_loader.prefetch = 1;
  o.eval_loader.prefetch = 1;
  {
    train::Trainer trainer(run.parts, o, RankInfo{}, nullptr);
    (void)trainer.run();
  }
  counted->synchronize();
  return counted->peak();
}

void check(const Setup& s) {
  const std::size_t one = peak_over(s, 1);
  const std::size_t three = peak_over(s, 3);
  BOOST_TEST_MESSAGE(s.model << " " << s.precision << ": device-memory peak " << one << " bytes over 1 epoch, " << three
                             << " over 3");
  BOOST_TEST(one > 0u);
  BOOST_TEST(three == one, s.model << " in " << s.precision << ": the peak grew from " << one << " to " << three
                                   << " bytes between 1 and 3 epochs");
}

Setup mlp(const std::string& precision) {
  return {precision, precision == "bf16" ? "allow_emulated = true" : "", "mlp", "hidden = [32]\ndropout = 0.1", "mnist",
          "limit = 128", "split = \"test\"\nlimit = 64"};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device_memory)

BOOST_AUTO_TEST_CASE(an_mlp_run_peaks_the_same_over_one_epoch_and_three) {
  for (const char* precision : {"fp32", "bf16", "fp16"}) check(mlp(precision));
}

BOOST_AUTO_TEST_CASE(a_resnet_run_peaks_the_same_over_one_epoch_and_three) {
  check({"fp32", "", "resnet", "depth = 18\nwidth = 0.25\nimage_size = 32\nnum_classes = 10", "synthetic",
         "shape = [3, 32, 32]\nclasses = 10\ncount = 32\nseed = 1", "shape = [3, 32, 32]\nclasses = 10\ncount = 16\nseed = 2"});
}

BOOST_AUTO_TEST_SUITE_END()
