// Device memory of the resnet model, counted as a GPU's caching allocator counts it (every
// allocated byte, touched or not; support/live_bytes_backend.hpp):
//   - build() never holds more than what it keeps: the layers' activation-gradient buffers, and
//     a frozen prefix's forward outputs, which end up sharing a few slots, are given back as each
//     block is built rather than all at once at the end. On an H200 the old order made ResNet-50's
//     build peak at twice the model's whole steady state (28,820 MiB in bf16 at batch 256, the
//     peak of the run) although nothing of the kind shows on the cpu backend, where untouched
//     buffers are never resident;
//   - a training step (forward, backward) and an eval forward allocate nothing that outlives them.
// ResNet-50 at 64x64 keeps the sizes small while every block kind (downsample, stride, identity)
// is there; the buffers' proportions do not depend on the image size. ResNet-18 (basic blocks)
// and ResNet-101 (a longer layer3) are checked too.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "../support/live_bytes_backend.hpp"
#include "nn_fixture.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::test::cpu;

constexpr double kMiB = 1024.0 * 1024.0;

struct Figures {
  std::size_t build_peak = 0;   // the most alive at once during build()
  std::size_t after_build = 0;  // alive once build() returned
  std::size_t after_step = 0;   // alive after a train-mode forward and backward
  std::size_t after_eval = 0;   // and an eval-mode forward
  std::size_t frozen_prefix_blocks = 0;
};

Figures measure(const std::vector<std::string>& frozen_prefixes, int depth = 50) {
  kiln::test::LiveBytesBackend backend(cpu());
  auto model = kiln::test::make_resnet("depth = " + std::to_string(depth) + "\nimage_size = 64\nnum_classes = 10");
  kiln::ModelBuildContext ctx;
  ctx.backend = &backend;
  ctx.max_batch = 2;
  ctx.seed = 7;
  ctx.frozen = [&](std::string_view name) {
    for (const std::string& p : frozen_prefixes) {
      if (name.substr(0, p.size()) == p) return true;
    }
    return false;
  };
  model->build(ctx);  // the backend is new: its peak is the build's
  Figures f;
  f.build_peak = backend.peak();
  f.after_build = backend.live();
  f.frozen_prefix_blocks = model->frozen_prefix_blocks();

  std::mt19937 rng(3);
  const kiln::Tensor x = kiln::test::device_f32({2, 3, 64, 64}, kiln::test::uniform(2 * 3 * 64 * 64, rng));
  {
    const kiln::Tensor logits = model->forward(x, kiln::Mode::train, 1);
    const kiln::Tensor dlogits = kiln::test::device_f32(logits.shape(), kiln::test::uniform(20, rng));
    model->backward(dlogits, [](std::size_t) {});
    backend.synchronize();
  }
  f.after_step = backend.live();
  (void)model->forward(x, kiln::Mode::eval, 1);
  backend.synchronize();
  f.after_eval = backend.live();
  BOOST_TEST_MESSAGE("resnet" << depth << " 64x64 batch 2, f32, " << f.frozen_prefix_blocks << " frozen-prefix blocks: build peak "
                     << f.build_peak / kMiB << " MiB, alive after build " << f.after_build / kMiB
                     << " MiB, after a step " << f.after_step / kMiB << " MiB");
  return f;
}

void check(const Figures& f) {
  // The input tensors above were not allocated through the counting backend.
  BOOST_TEST(f.build_peak <= f.after_build, "build() peaked at " << f.build_peak / kMiB << " MiB but keeps "
                                                << f.after_build / kMiB
                                                << " MiB: buffers it gives back were all alive at once");
  BOOST_TEST(f.after_step == f.after_build, "a training step left " << (double(f.after_step) - double(f.after_build)) / kMiB
                                                << " MiB more allocated than build() had");
  BOOST_TEST(f.after_eval == f.after_build, "an eval forward left " << (double(f.after_eval) - double(f.after_build)) / kMiB
                                                << " MiB more allocated than build() had");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(build_memory, *boost::unit_test::precondition(kiln::test::cnn_ops_available))

BOOST_AUTO_TEST_CASE(resnet50_build_never_holds_more_than_it_keeps) {
  const Figures f = measure({});
  BOOST_TEST(f.frozen_prefix_blocks == 0u);
  check(f);
}

// The basic blocks of ResNet-18 and the deeper stages of ResNet-101 lay out the same way.
BOOST_AUTO_TEST_CASE(resnet18_and_resnet101_too) {
  check(measure({}, 18));
  check(measure({}, 101));
}

BOOST_AUTO_TEST_CASE(resnet50_with_a_frozen_prefix_too) {
  // The stem and layer1-2 run forward only: their outputs share four buffers.
  const Figures f = measure({"conv1.", "bn1.", "layer1.", "layer2."});
  BOOST_TEST(f.frozen_prefix_blocks == 7u);
  check(f);
}

BOOST_AUTO_TEST_SUITE_END()
