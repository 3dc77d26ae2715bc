// The assumption behind the cuda backend's filter-copy reuse (plugins/backend-cuda/dnn/
// filter_copy.hpp), checked over real training on the CPU: nothing writes a convolution's weights
// between the forward that laid them out and the backward-data call that reads that layout again.
//
// FilterWatchBackend wraps the cpu backend and keeps the cuda backend's own FilterCopyLedger per
// conv plan, as conv_ops.cpp does (a copy at every forward: stricter than cuda, which keeps one
// only when it converts). Where the ledger lets a backward-data call reuse the forward's copy, the
// weight bytes must equal those the forward read. On the CPU a parameter is host memory, so this
// catches every writer, whoever it is (optimizer ops, precision casts, checkpoint load, a
// communicator's broadcast writing memory directly), without a list of write paths that could miss
// one. The runs cover fp32, bf16 and fp16 (compute copies recast every step), gradient
// accumulation, evaluation between epochs, step checkpoints and a resume from one, u8 input.
// The same watch checks that every convolution, the stem included, reads its input in the
// backend's activation layout (the resnet model reorders floating input for the stem).
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dnn/filter_copy.hpp"
#include "kiln/backend.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/trainer.hpp"
#include "train_fixture.hpp"
#include "../support/forwarding_backend.hpp"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

class FilterWatchBackend final : public test::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  std::int64_t reuses = 0;       ///< backward-data calls the ledger let read the forward's copy
  std::int64_t stale_reuses = 0; ///< ... whose weights had changed since that forward
  std::int64_t backward_data_calls = 0;
  /// Convolution forwards whose input was not in activation_layout() (a stem reading NCHW).
  std::int64_t forwards_off_layout = 0;

  std::string_view name() const override { return "filter-watch-cpu"; }

  std::shared_ptr<OpPlan> plan_conv2d(const Conv2dDesc& desc) override {
    auto plan = ForwardingBackend::plan_conv2d(desc);
    watched_[plan.get()].dtype = desc.dtype;
    return plan;
  }
  void conv2d_forward(OpPlan& plan, const Tensor& y, const Tensor& x, const Tensor& w) override {
    Watched& p = watched(plan);
    if (x.layout() != inner().activation_layout(p.dtype)) ++forwards_off_layout;
    p.ledger.forward_begins();
    ForwardingBackend::conv2d_forward(plan, y, x, w);
    const auto* bytes = static_cast<const unsigned char*>(w.data());
    p.weights_at_forward.assign(bytes, bytes + w.bytes());
    p.ledger.copy_made(use(p, w, x.layout()));
  }
  void conv2d_backward_data(OpPlan& plan, const Tensor& dx, const Tensor& dy, const Tensor& w) override {
    Watched& p = watched(plan);
    ++backward_data_calls;
    if (p.ledger.take_for_backward(use(p, w, dy.layout()))) {
      ++reuses;
      if (p.weights_at_forward.size() != w.bytes() ||
          std::memcmp(p.weights_at_forward.data(), w.data(), w.bytes()) != 0) {
        ++stale_reuses;
      }
    }
    ForwardingBackend::conv2d_backward_data(plan, dx, dy, w);
  }

 private:
  struct Watched {
    DType dtype = DType::f32;
    cuda::FilterCopyLedger ledger;
    std::vector<unsigned char> weights_at_forward;
  };
  Watched& watched(const OpPlan& plan) {
    const auto it = watched_.find(&plan);
    BOOST_REQUIRE_MESSAGE(it != watched_.end(), "a conv plan this backend did not make");
    return it->second;
  }
  static cuda::FilterUse use(const Watched& p, const Tensor& w, Layout working) {
    return cuda::FilterUse{w.data(), w.numel(), w.dtype(), p.dtype, working};
  }

  std::map<const OpPlan*, Watched> watched_;
};

struct Scenario {
  std::string precision = "fp32";
  std::string input = "f32";
  std::int64_t accumulate_steps = 1;
};

struct Watch {
  std::int64_t reuses = 0, stale_reuses = 0, backward_data_calls = 0, forwards_off_layout = 0;
};

/// Trains a narrow ResNet-18 on synthetic images through the watching backend; with `ckpt` set,
/// writes a checkpoint every 2 optimizer steps, and with `resume` set starts from one.
Watch train_resnet(const Scenario& s, int epochs, const fs::path& ckpt, const fs::path& resume) {
  test::PluginRun run;
  using R = plugin::Registry;
  std::shared_ptr<Backend> cpu = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  auto watch = std::make_shared<FilterWatchBackend>(cpu);
  run.parts.backend = watch;
  // The filter reuse, not the speed, is under test: a CPU without native bf16 runs it too.
  run.parts.precision = run.make(KILN_KIND_PRECISION, s.precision, s.precision == "bf16" ? "allow_emulated = true" : "",
                                 &R::create_precision);
  run.parts.model = run.make(KILN_KIND_MODEL, "resnet",
                             "depth = 18\nwidth = 0.125\nnum_classes = 4\nimage_size = 32\ninput = \"" + s.input + "\"",
                             &R::create_model);
  const std::string data = "shape = [3, 32, 32]\nclasses = 4\noutput = \"" + s.input + "\"\n";
  run.parts.train_data = run.make(KILN_KIND_DATA, "synthetic", data + "count = 32", &R::create_data);
  run.parts.eval_data = run.make(KILN_KIND_DATA, "synthetic", data + "count = 8\nseed = 5", &R::create_data);
  test::connect_local_comm(run);
  train::TrainerOptions o = test::sgd_trainer_options(epochs, 4, 0.1);
  o.accumulate_steps = s.accumulate_steps;
  if (!ckpt.empty()) {
    o.checkpoint_dir = ckpt;
    o.checkpoint_every_steps = 2;
  }
  o.resume_from = resume;
  {
    train::Trainer trainer(run.parts, o, RankInfo{}, nullptr);
    trainer.run();
  }
  return Watch{watch->reuses, watch->stale_reuses, watch->backward_data_calls, watch->forwards_off_layout};
}

std::string describe(const Scenario& s) {
  return s.precision + ", input " + s.input + ", accumulate " + std::to_string(s.accumulate_steps);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv_filter_reuse)

BOOST_AUTO_TEST_CASE(no_weight_changes_between_a_forward_and_the_backward_that_reuses_its_filter) {
  const Scenario scenarios[] = {{"fp32", "f32", 1}, {"bf16", "f32", 2}, {"fp16", "u8", 1}, {"bf16", "u8", 3}};
  for (const Scenario& s : scenarios) {
    BOOST_TEST_CONTEXT(describe(s)) {
      const Watch w = train_resnet(s, 2, {}, {});
      // Every backward-data call follows its own forward, so every one reuses, and none stale.
      BOOST_TEST(w.backward_data_calls > 0);
      BOOST_TEST(w.reuses == w.backward_data_calls);
      BOOST_TEST(w.stale_reuses == 0);
      // The stem too reads its input channels-last (the resnet model reorders f32 input), so no
      // convolution reorders a 64-channel output or gradient.
      BOOST_TEST(w.forwards_off_layout == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(nor_around_checkpoints_and_a_resume) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-filter-reuse-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const Scenario s{"bf16", "f32", 1};
  const Watch first = train_resnet(s, 1, dir, {});
  BOOST_TEST(first.reuses > 0);
  BOOST_TEST(first.stale_reuses == 0);
  std::vector<fs::path> saved;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().starts_with("epoch-")) saved.push_back(e.path());
  }
  BOOST_REQUIRE(!saved.empty());
  std::sort(saved.begin(), saved.end());
  // Restoring writes every parameter (and the compute copies follow at the next step).
  const Watch resumed = train_resnet(s, 2, dir / "resumed", saved.front());
  BOOST_TEST(resumed.reuses > 0);
  BOOST_TEST(resumed.stale_reuses == 0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_watch_sees_a_write_between_forward_and_backward) {
  // The check above is only as good as its detector: a weight written between a forward and
  // the backward-data call after it (what the trainer never does) is reported as a stale reuse.
  test::PluginRun run;
  FilterWatchBackend watch(run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &plugin::Registry::create_backend));
  Conv2dDesc d;
  d.n = 1;
  d.c = 2;
  d.h = d.w = 4;
  d.k = 2;
  d.r = d.s = 3;
  d.pad_h = d.pad_w = 1;
  d.dtype = DType::f32;
  auto plan = watch.plan_conv2d(d);
  const Tensor x = watch.allocate({1, 2, 4, 4}, DType::f32, MemoryKind::device);
  const Tensor y = watch.allocate({1, 2, 4, 4}, DType::f32, MemoryKind::device);
  const Tensor w = watch.allocate({2, 2, 3, 3}, DType::f32, MemoryKind::device);
  watch.fill(x, 1.0);
  watch.fill(w, 0.5);
  watch.conv2d_forward(*plan, y, x, w);
  watch.conv2d_backward_data(*plan, x, y, w);
  BOOST_TEST(watch.reuses == 1);
  BOOST_TEST(watch.stale_reuses == 0);
  watch.conv2d_forward(*plan, y, x, w);
  watch.fill(w, 0.25);
  watch.conv2d_backward_data(*plan, x, y, w);
  BOOST_TEST(watch.reuses == 2);
  BOOST_TEST(watch.stale_reuses == 1);
}

BOOST_AUTO_TEST_SUITE_END()
