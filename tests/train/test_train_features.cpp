// Training features: gradient clipping by global norm, gradient accumulation (the same weights
// as one big batch, and no collective on the intermediate micro-steps), step-based checkpoints
// that resume bit-identically from the middle of an epoch, early stopping, keeping the best
// checkpoint, and the config checks of their keys.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/communicator.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/train/accumulation.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/checkpoint_policy.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/early_stop.hpp"
#include "kiln/train/grad_clip.hpp"
#include "kiln/train/trainer.hpp"
#include "kiln/train/training_features.hpp"
#include "kiln/train/weight_ema.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using kiln::train::TrainerOptions;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kiln-features-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// Forwards to a real communicator and counts all-reduces: of the gradient arena and in all.
class CountingComm final : public kiln::Communicator {
 public:
  explicit CountingComm(std::shared_ptr<kiln::Communicator> inner) : inner_(std::move(inner)) {}
  const kiln::Storage* grad_storage = nullptr;
  std::size_t grad_reduces = 0, all_reduces = 0, other_collectives = 0;

  std::string_view name() const override { return inner_->name(); }
  void connect(const kiln::CommContext& ctx) override { inner_->connect(ctx); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool accepts(kiln::MemoryKind kind) const override { return inner_->accepts(kind); }
  std::string describe() const override { return inner_->describe(); }
  std::unique_ptr<kiln::Work> all_reduce(const kiln::Tensor& t, kiln::ReduceOp op) override {
    ++all_reduces;
    grad_reduces += t.storage().get() == grad_storage;
    return inner_->all_reduce(t, op);
  }
  std::unique_ptr<kiln::Work> broadcast(const kiln::Tensor& t, int root) override {
    ++other_collectives;
    return inner_->broadcast(t, root);
  }
  std::unique_ptr<kiln::Work> all_gather(const kiln::Tensor& out, const kiln::Tensor& in) override {
    ++other_collectives;
    return inner_->all_gather(out, in);
  }
  void barrier() override {
    ++other_collectives;
    inner_->barrier();
  }
  void abort() noexcept override { inner_->abort(); }

 private:
  std::shared_ptr<kiln::Communicator> inner_;
};

struct Trained {
  std::vector<double> params;
  kiln::train::TrainResult result;
  std::size_t grad_reduces = 0, all_reduces = 0;
};

/// Trains the MLP (dropout as given) on 640 Fashion-MNIST samples with Adam and a cosine
/// schedule; `tweak` adjusts the options (batch, accumulation, checkpoints, ...).
Trained train(const std::function<void(TrainerOptions&)>& tweak, const std::string& model = "hidden = [16]\ndropout = 0.2",
              const std::string& precision = "fp32") {
  kiln::test::PluginRun run;
  using R = kiln::plugin::Registry;
  run.parts.backend = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  auto counting = std::make_shared<CountingComm>(run.make(KILN_KIND_COMMUNICATOR, "local", "", &R::create_communicator));
  run.parts.comm = counting;
  run.parts.precision = run.make(KILN_KIND_PRECISION, precision, "", &R::create_precision);
  run.parts.model = run.make(KILN_KIND_MODEL, "mlp", model, &R::create_model);
  run.parts.train_data = run.make(KILN_KIND_DATA, "mnist", "limit = 640", &R::create_data);
  kiln::CommContext cc;
  cc.backend = run.parts.backend.get();
  run.parts.comm->connect(cc);

  TrainerOptions o;
  o.epochs = 2;
  o.seed = 7;
  o.train_loader.shard.batch = 32;
  o.train_loader.shard.seed = 7;
  o.optimizer_type = "adam";
  o.optimizer_table = kiln::test::core_table("optimizer", "lr = 0.01", kiln::train::optimizer_schema("adam"));
  o.schedule_type = "cosine";
  o.schedule_table = kiln::test::core_table("schedule", "", kiln::train::schedule_schema("constant"));
  o.progress = kiln::io::Progress::Mode::never;
  o.stop_on_nonfinite_loss = false;  // its checks are collectives too; counted tests want only the gradients'
  tweak(o);
  auto model_ref = run.parts.model;
  kiln::train::Trainer trainer(run.parts, o, kiln::RankInfo{}, nullptr);
  counting->grad_storage = model_ref->parameters().front().grad.storage().get();
  counting->grad_reduces = counting->all_reduces = 0;
  Trained out;
  out.result = trainer.run();
  out.grad_reduces = counting->grad_reduces;
  out.all_reduces = counting->all_reduces;
  for (const auto& p : model_ref->parameters()) {
    const auto v = kiln::test::read(p.value);
    out.params.insert(out.params.end(), v.begin(), v.end());
  }
  return out;
}

std::size_t count_differing(const std::vector<double>& a, const std::vector<double>& b) {
  BOOST_TEST_REQUIRE(a.size() == b.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

double worst_difference(const std::vector<double>& a, const std::vector<double>& b) {
  BOOST_TEST_REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

/// Three parameters with random gradients in one ParameterStore on the CPU backend.
struct ThreeGrads {
  kiln::nn::ParameterStore store;
  std::vector<double> g;  // all gradient values, in order
  explicit ThreeGrads(double magnitude) {
    const std::vector<std::int64_t> sizes = {300, 7, 1000};
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      store.declare("p" + std::to_string(i), {sizes[i]}, kiln::nn::Init::zeros());
    }
    store.allocate(kiln::test::cpu(), kiln::DType::f32, kiln::DType::f32, 1);
    std::mt19937 rng(3);
    for (const auto& p : store.parameters()) {
      const auto v = kiln::test::uniform(static_cast<std::size_t>(p.grad.numel()), rng, -magnitude, magnitude);
      kiln::test::write(p.grad, v);
      g.insert(g.end(), v.begin(), v.end());
    }
  }
  std::vector<double> grads() const {
    std::vector<double> out;
    for (const auto& p : store.parameters()) {
      const auto v = kiln::test::read(p.grad);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
};

double host_norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += static_cast<double>(static_cast<float>(x)) * static_cast<float>(x);
  return std::sqrt(s);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(train_features)

// ---- gradient clipping ----

BOOST_AUTO_TEST_CASE(the_global_norm_is_that_of_all_gradients_together) {
  ThreeGrads t(0.5);
  kiln::train::GradClipper clip(kiln::test::cpu(), t.store.parameters(), 1000.0);
  const double want = host_norm(t.g);
  BOOST_TEST(want > 5.0);
  BOOST_TEST(std::fabs(clip.norm() - want) <= 1e-5 * want);
  // Below the threshold nothing changes, and the norm before clipping is returned.
  const auto before = t.grads();
  BOOST_TEST(std::fabs(clip.clip() - want) <= 1e-5 * want);
  BOOST_TEST(count_differing(before, t.grads()) == 0u);
}

BOOST_AUTO_TEST_CASE(clipping_scales_every_gradient_to_the_max_norm) {
  ThreeGrads t(0.5);
  const double before_norm = host_norm(t.g);
  kiln::train::GradClipper clip(kiln::test::cpu(), t.store.parameters(), 1.0);
  const double reported = clip.clip();
  BOOST_TEST(std::fabs(reported - before_norm) <= 1e-5 * before_norm);
  const auto after = t.grads();
  BOOST_TEST(std::fabs(host_norm(after) - 1.0) <= 1e-5);
  // The direction is kept: every element is scaled by the same factor.
  const double factor = 1.0 / (before_norm + 1e-6);
  for (std::size_t i = 0; i < after.size(); ++i) BOOST_TEST(std::fabs(after[i] - t.g[i] * factor) <= 1e-6);
}

BOOST_AUTO_TEST_CASE(a_non_finite_norm_stops_instead_of_writing_nan_into_the_weights) {
  ThreeGrads t(0.5);
  kiln::test::write(t.store.parameters()[1].grad, std::vector<double>(7, std::nan("")));
  kiln::train::GradClipper clip(kiln::test::cpu(), t.store.parameters(), 1.0);
  const std::string msg = kiln::test::error_text<kiln::NumericError>([&] { clip.clip(); });
  BOOST_TEST(msg.find("the global gradient norm is nan") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(clipping_in_training_changes_the_weights_and_a_huge_max_norm_does_not) {
  const auto plain = train([](TrainerOptions&) {});
  const auto huge = train([](TrainerOptions& o) { o.clip_grad_norm = 1e9; });
  const auto tight = train([](TrainerOptions& o) { o.clip_grad_norm = 0.05; });
  BOOST_TEST(count_differing(plain.params, huge.params) == 0u);
  BOOST_TEST(count_differing(plain.params, tight.params) > plain.params.size() / 2);
}

BOOST_AUTO_TEST_CASE(under_fp16_the_unscaled_gradients_are_clipped) {
  // SGD follows the gradient's size (Adam would hide it): clipping the still-scaled fp16
  // gradients (2^16 times larger) would shrink every update 65536-fold. Clipped after unscaling,
  // fp16 lands next to fp32 with the same clipping.
  auto sgd = [](double clip) {
    return [clip](TrainerOptions& o) {
      o.optimizer_type = "sgd";
      o.optimizer_table = kiln::test::core_table("optimizer", "lr = 0.1", kiln::train::optimizer_schema("sgd"));
      o.clip_grad_norm = clip;
    };
  };
  const std::string no_dropout = "hidden = [16]\ndropout = 0";
  const auto fp32_free = train(sgd(0), no_dropout);
  const auto fp32_clipped = train(sgd(0.1), no_dropout);
  const auto fp16_clipped = train(sgd(0.1), no_dropout, "fp16");
  const double clipping_moves = worst_difference(fp32_free.params, fp32_clipped.params);
  const double fp16_off_by = worst_difference(fp32_clipped.params, fp16_clipped.params);
  BOOST_TEST_MESSAGE("sgd: clipping moves weights by up to " << clipping_moves << "; fp16 vs fp32, both clipped: "
                                                             << fp16_off_by);
  BOOST_TEST(fp16_off_by < 0.05 * clipping_moves);
}

// ---- gradient accumulation ----

BOOST_AUTO_TEST_CASE(micro_steps_are_grouped_within_an_epoch_and_weighted_by_the_group_rows) {
  kiln::data::ShardOptions s;
  s.count = 100;
  s.batch = 8;
  s.world_size = 2;
  s.last_batch = kiln::data::LastBatch::partial;  // 7 steps: six of 16 rows, one of 4
  kiln::train::AccumulationPlan plan(s, 3);
  BOOST_TEST(plan.loader_steps_per_epoch() == 7);
  BOOST_TEST(plan.updates_per_epoch() == 3);  // {0,1,2} {3,4,5} {6}
  BOOST_TEST(plan.at(0).first);
  BOOST_TEST(!plan.at(0).last);
  BOOST_TEST(plan.at(2).last);
  BOOST_TEST(plan.at(2).group_rows == 48);
  BOOST_TEST(plan.at(4).group == 1);
  BOOST_TEST((plan.at(6).first && plan.at(6).last));
  BOOST_TEST(plan.at(6).group_rows == 4);
  BOOST_TEST(plan.loader_steps_after(2) == 6);
  BOOST_TEST(plan.loader_steps_after(3) == 7);
  BOOST_CHECK_THROW(kiln::train::AccumulationPlan(s, 0), kiln::ConfigError);
}

BOOST_AUTO_TEST_CASE(four_micro_steps_of_8_equal_one_step_of_32_without_intermediate_collectives) {
  const std::string no_dropout = "hidden = [16]\ndropout = 0";
  const auto big = train([](TrainerOptions&) {}, no_dropout);  // 20 steps of 32 per epoch
  const auto micro = train(
      [](TrainerOptions& o) {
        o.train_loader.shard.batch = 8;
        o.accumulate_steps = 4;
      },
      no_dropout);
  const auto small = train([](TrainerOptions& o) { o.train_loader.shard.batch = 8; }, no_dropout);
  // The same optimizer steps (the schedule and `step` count them) over the same samples: the
  // weights agree up to the order of f32 sums (measured: 3.4e-7; fp16 below: 4.8e-6).
  BOOST_TEST(micro.result.steps == big.result.steps);
  BOOST_TEST(micro.result.steps == 40);
  const double worst = worst_difference(big.params, micro.params);
  BOOST_TEST_MESSAGE("fp32: 4 x 8 accumulated vs 32: largest weight difference " << worst);
  BOOST_TEST(worst <= 5e-6, "largest difference " << worst);
  BOOST_TEST(worst_difference(big.params, small.params) > 1e-3);  // accumulation is not a no-op
  // One gradient all-reduce (one bucket) per optimizer step, none for the 3 micro-steps before it:
  // the same run without accumulation makes exactly 3 x 40 more, and nothing else differs.
  BOOST_TEST(micro.grad_reduces == 40u);
  BOOST_TEST(small.grad_reduces == 160u);
  BOOST_TEST(small.all_reduces - micro.all_reduces == 120u);
}

BOOST_AUTO_TEST_CASE(accumulation_with_fp16_loss_scaling_matches_one_big_step) {
  const std::string no_dropout = "hidden = [16]\ndropout = 0";
  const auto big = train([](TrainerOptions&) {}, no_dropout, "fp16");
  const auto micro = train(
      [](TrainerOptions& o) {
        o.train_loader.shard.batch = 16;
        o.accumulate_steps = 2;
      },
      no_dropout, "fp16");
  const double worst = worst_difference(big.params, micro.params);
  BOOST_TEST_MESSAGE("fp16: 2 x 16 accumulated vs 32: largest weight difference " << worst);
  BOOST_TEST(worst <= 1e-4, "largest difference " << worst);
}

// ---- step-based checkpoints ----

BOOST_AUTO_TEST_CASE(resuming_from_the_middle_of_an_epoch_reproduces_the_uninterrupted_run) {
  const fs::path dir = fresh_dir("mid-epoch");
  for (const std::int64_t accumulate : {1, 2}) {
    const fs::path a = dir / ("a" + std::to_string(accumulate)), b = dir / ("b" + std::to_string(accumulate));
    auto with_checkpoints = [&](const fs::path& ckpt, const fs::path& resume) {
      return [=](TrainerOptions& o) {
        o.epochs = 3;
        o.accumulate_steps = accumulate;
        o.checkpoint_dir = ckpt;
        o.checkpoint_every = 0;  // step checkpoints only
        o.checkpoint_every_steps = 5;
        o.checkpoint_keep = 100;
        o.resume_from = resume;
      };
    };
    const auto straight = train(with_checkpoints(a, {}));
    // 20 loader steps an epoch, so 20 (or, 2 micro-steps a step, 10) optimizer steps. Global step
    // 45 (25) is 5 optimizer steps into the third and last epoch.
    const std::string name = accumulate == 1 ? "epoch-0002-step-00000045" : "epoch-0002-step-00000025";
    BOOST_TEST_REQUIRE(fs::exists(a / name / "trainer.safetensors"), name << " in " << a);
    const auto state = kiln::train::inspect_checkpoint(a / name);
    BOOST_TEST(state.epoch_steps_done == (accumulate == 1 ? 5 : 10));
    BOOST_TEST(state.epochs_done == 2);
    // A step checkpoint due on an epoch's last step is written as that epoch's checkpoint.
    BOOST_TEST(!fs::exists(a / (accumulate == 1 ? "epoch-0000-step-00000020" : "epoch-0000-step-00000010")));
    BOOST_TEST(fs::exists(a / "epoch-0001" / "model.safetensors"));
    BOOST_TEST(fs::exists(a / "epoch-0003" / "model.safetensors"));
    const auto resumed = train(with_checkpoints(b, a / name));
    BOOST_TEST(count_differing(straight.params, resumed.params) == 0u,
               "accumulate " << accumulate << ": parameters differ after resuming mid-epoch");
    BOOST_TEST(resumed.result.steps == straight.result.steps);
    // The resumed epoch's train metrics include the steps before the checkpoint.
    BOOST_TEST(std::fabs(resumed.result.final_train_loss - straight.result.final_train_loss) <=
               1e-6 * straight.result.final_train_loss);
    BOOST_TEST(resumed.result.final_train_accuracy == straight.result.final_train_accuracy);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(step_checkpoint_names_sort_in_the_order_they_were_written) {
  kiln::train::TrainerState end1, mid, end2;
  end1.epochs_done = 1;
  mid.epochs_done = 1;
  mid.epoch_steps_done = 5;
  mid.global_step = 25;
  end2.epochs_done = 2;
  BOOST_TEST(kiln::train::checkpoint_name(end1) == "epoch-0001");
  BOOST_TEST(kiln::train::checkpoint_name(mid) == "epoch-0001-step-00000025");
  BOOST_TEST((kiln::train::checkpoint_name(end1) < kiln::train::checkpoint_name(mid)));
  BOOST_TEST((kiln::train::checkpoint_name(mid) < kiln::train::checkpoint_name(end2)));
}

// ---- early stopping ----

BOOST_AUTO_TEST_CASE(early_stopping_counts_epochs_without_an_improvement_beyond_min_delta) {
  kiln::train::EarlyStopOptions o;
  o.metric = kiln::train::parse_watched_metric("eval_loss", "test.toml:2:1: [early_stop] metric", "auto", true);
  o.patience = 2;
  o.min_delta = 0.01;
  BOOST_TEST((o.metric.goal == kiln::train::Goal::min));
  kiln::train::EarlyStopper s(o);
  auto epoch = [](double loss) {
    kiln::train::EpochMetrics m;
    m.eval_loss = loss;
    return m;
  };
  BOOST_TEST(!s.update(0, epoch(1.0)));
  BOOST_TEST(!s.update(1, epoch(0.9)));    // better
  BOOST_TEST(!s.update(2, epoch(0.895)));  // better, but by less than min_delta: 1 bad epoch
  // Restored from a checkpoint's state, the count goes on.
  kiln::train::EarlyStopper resumed(o);
  resumed.load_state(s.state());
  BOOST_TEST(resumed.update(3, epoch(0.92)));  // 2 bad epochs: stop
  BOOST_TEST(resumed.reason().find("eval_loss (min) has not improved by more than 0.01 for 2 epochs; best 0.9 after "
                                   "epoch 2") != std::string::npos,
             resumed.reason());

  const auto acc = kiln::train::parse_watched_metric("eval_accuracy", "x", "auto", true);
  BOOST_TEST((acc.goal == kiln::train::Goal::max));
  BOOST_TEST(acc.improves(0.8, 0.7, 0.0));
}

BOOST_AUTO_TEST_CASE(a_stopped_run_ends_normally_with_its_last_checkpoint_written) {
  const fs::path dir = fresh_dir("early-stop");
  // The training loss falls every epoch, so watching it for a maximum never improves after the
  // first epoch: with patience 1 the run stops after epoch 2 of 5.
  const auto r = train([&](TrainerOptions& o) {
    o.epochs = 5;
    o.checkpoint_dir = dir;
    o.checkpoint_every = 3;
    kiln::train::EarlyStopOptions es;
    es.metric = kiln::train::parse_watched_metric("train_loss", "x", "max", false);
    es.patience = 1;
    o.early_stop = es;
  });
  BOOST_TEST(r.result.steps == 40);
  BOOST_TEST(r.result.stopped_early.find("early stopping: train_loss (max) has not improved") == 0u,
             r.result.stopped_early);
  BOOST_TEST(r.result.stopped_early.find("stopped after epoch 2 of 5") != std::string::npos);
  BOOST_TEST(fs::exists(dir / "epoch-0002" / "model.safetensors"));  // written although every_epochs = 3
  const auto st = kiln::train::inspect_checkpoint(dir / "epoch-0002");
  BOOST_TEST(st.extra.at("early_stop.bad_epochs") == 1.0);
  fs::remove_all(dir);
}

// ---- the best checkpoint ----

BOOST_AUTO_TEST_CASE(the_best_checkpoint_is_kept_apart_from_rotation_and_resume_auto_ignores_it) {
  const fs::path dir = fresh_dir("keep-best");
  // Watching the falling training loss for a maximum: the first epoch stays the best.
  train([&](TrainerOptions& o) {
    o.epochs = 3;
    o.checkpoint_dir = dir;
    o.checkpoint_every = 1;
    o.checkpoint_keep = 1;
    o.keep_best = kiln::train::parse_watched_metric("train_loss", "x", "max", false);
  });
  BOOST_TEST(!fs::exists(dir / "epoch-0001"));  // rotated away
  BOOST_TEST(fs::exists(dir / "epoch-0003"));
  BOOST_TEST_REQUIRE(fs::exists(dir / "best" / "model.safetensors"));
  const auto meta = kiln::train::checkpoint_metadata(dir / "best");
  BOOST_TEST(meta.at("best.metric") == "train_loss");
  BOOST_TEST(meta.at("best.mode") == "max");
  BOOST_TEST(meta.at("best.epoch") == "1");
  BOOST_TEST(meta.at("epochs_done") == "1");
  BOOST_TEST(std::stod(meta.at("best.value")) > 0.0);
  BOOST_TEST(kiln::train::latest_checkpoint(dir)->filename() == "epoch-0003");
  BOOST_TEST(kiln::train::latest_intact_checkpoint(dir)->dir.filename() == "epoch-0003");

  // With min the newest epoch is the best, replacing it each time.
  const fs::path dir2 = fresh_dir("keep-best-min");
  train([&](TrainerOptions& o) {
    o.epochs = 3;
    o.checkpoint_dir = dir2;
    o.checkpoint_every = 1;
    o.keep_best = kiln::train::parse_watched_metric("train_loss", "x", "auto", false);
  });
  BOOST_TEST(kiln::train::checkpoint_metadata(dir2 / "best").at("best.epoch") == "3");
  fs::remove_all(dir);
  fs::remove_all(dir2);
}

// ---- configuration ----

BOOST_AUTO_TEST_CASE(out_of_range_keys_are_refused_with_where_they_were_set) {
  using kiln::test::core_table;
  auto error_text = [](const std::function<void()>& f) { return kiln::test::error_text<kiln::ConfigError>(f); };
  const auto adam = kiln::train::optimizer_schema("adam");
  BOOST_TEST(error_text([&] { core_table("optimizer", "clip_grad_norm = -1.0", adam); })
                 .find("test.toml:2:") != std::string::npos);
  BOOST_TEST(error_text([&] { core_table("optimizer", "clip_grad_norm = inf", adam); })
                 .find("finite") != std::string::npos);
  BOOST_TEST(error_text([&] { core_table("loader", "accumulate_steps = 0", kiln::train::loader_schema()); })
                 .find("test.toml:2:") != std::string::npos);
  BOOST_TEST(error_text([&] { core_table("checkpoint", "every_steps = -5", kiln::train::checkpoint_schema()); })
                 .find("test.toml:2:") != std::string::npos);
  BOOST_TEST(error_text([&] { core_table("early_stop", "patience = 0", kiln::train::early_stop_schema()); })
                 .find("test.toml:2:") != std::string::npos);
  BOOST_TEST(error_text([&] { core_table("early_stop", "mode = \"up\"", kiln::train::early_stop_schema()); })
                 .find("test.toml:2:") != std::string::npos);

  const auto ckpt = core_table("checkpoint", "keep_best = \"eval_acc\"", kiln::train::checkpoint_schema());
  const std::string unknown = error_text([&] { kiln::train::checkpoint_policy_options(ckpt, true); });
  BOOST_TEST(unknown.find("checkpoint.keep_best (test.toml:2) = \"eval_acc\" is not a metric") == 0u, unknown);
  BOOST_TEST(unknown.find("valid metrics: eval_loss, eval_accuracy, eval_accuracy_top5, eval_ema_loss, eval_ema_accuracy, "
                          "eval_ema_accuracy_top5, train_loss, train_accuracy") != std::string::npos,
             unknown);

  const auto es = core_table("early_stop", "metric = \"eval_loss\"", kiln::train::early_stop_schema());
  const std::string no_eval = error_text([&] { kiln::train::early_stop_options(es, false); });
  BOOST_TEST(no_eval.find("early_stop.metric (test.toml:2) = \"eval_loss\"") == 0u, no_eval);
  BOOST_TEST(no_eval.find("needs an eval split, and this run has none") != std::string::npos, no_eval);
  BOOST_TEST(kiln::train::early_stop_options(es, true).has_value());
  const auto off = core_table("early_stop", "", kiln::train::early_stop_schema());
  BOOST_TEST(!kiln::train::early_stop_options(off, false).has_value());
}

// A key of a feature that is off would change nothing: refused where it was set, unless it holds
// its default (a run's config.toml writes every key out, and must rerun as it is).
BOOST_AUTO_TEST_CASE(keys_of_a_feature_that_is_off_are_refused_unless_at_their_default) {
  using kiln::test::core_table;
  auto error_text = [](const std::function<void()>& f) { return kiln::test::error_text<kiln::ConfigError>(f); };
  const auto es_schema = kiln::train::early_stop_schema();
  const auto patience = core_table("early_stop", "patience = 5", es_schema);
  BOOST_TEST(error_text([&] { kiln::train::early_stop_options(patience, true); }) ==
             "early_stop.patience (test.toml:2) = 5 has no effect: early stopping is off (early_stop.metric is \"\"); "
             "set early_stop.metric to the metric to watch, or remove the key");
  BOOST_TEST(error_text([&] { kiln::train::early_stop_options(core_table("early_stop", "mode = \"max\"", es_schema), true); })
                 .find("early_stop.mode (test.toml:2) = \"max\" has no effect") == 0u);
  BOOST_TEST(error_text([&] { kiln::train::early_stop_options(core_table("early_stop", "min_delta = 0.5", es_schema), true); })
                 .find("early_stop.min_delta (test.toml:2) = 0.5 has no effect") == 0u);
  // Written out at their defaults, as config.toml has them: accepted, and still off.
  const auto resolved = core_table("early_stop", "metric = \"\"\nmin_delta = 0.0\nmode = \"auto\"\npatience = 3", es_schema);
  BOOST_TEST(!kiln::train::early_stop_options(resolved, true).has_value());
  // With a metric, the same keys are read.
  BOOST_TEST(kiln::train::early_stop_options(core_table("early_stop", "metric = \"train_loss\"\npatience = 5", es_schema),
                                             false)->patience == 5);

  const auto ck_schema = kiln::train::checkpoint_schema();
  BOOST_TEST(error_text([&] {
               kiln::train::checkpoint_policy_options(core_table("checkpoint", "keep_best_mode = \"min\"", ck_schema), true);
             }).find("checkpoint.keep_best_mode (test.toml:2) = \"min\" has no effect: no best checkpoint is kept") == 0u);
  BOOST_TEST(!kiln::train::checkpoint_policy_options(core_table("checkpoint", "keep_best_mode = \"auto\"", ck_schema), true)
                  .keep_best.has_value());

  const auto ema_schema = kiln::train::ema_schema();
  BOOST_TEST(error_text([&] { kiln::train::ema_options(core_table("ema", "every_steps = 4", ema_schema)); }) ==
             "ema.every_steps (test.toml:2) = 4 has no effect: the moving average is off (ema.decay is 0); set ema.decay "
             "(0.999 or 0.9999 are usual) to keep one, or remove the key");
  BOOST_TEST(error_text([&] { kiln::train::ema_options(core_table("ema", "evaluate = false", ema_schema)); })
                 .find("ema.evaluate (test.toml:2) = false has no effect") == 0u);
  BOOST_TEST(!kiln::train::ema_options(core_table("ema", "decay = 0.0\nevaluate = true\nevery_steps = 1", ema_schema))
                  .has_value());
  const auto on = kiln::train::ema_options(core_table("ema", "decay = 0.99\nevery_steps = 4\nevaluate = false", ema_schema));
  BOOST_TEST_REQUIRE(on.has_value());
  BOOST_TEST(on->decay == 0.99);
  BOOST_TEST(on->every_steps == 4);
  BOOST_TEST(!on->evaluate);
  BOOST_TEST(error_text([&] { core_table("ema", "decay = 1.0", ema_schema); }).find("test.toml:2:") != std::string::npos);
  BOOST_TEST(error_text([&] { kiln::train::ema_options(core_table("ema", "warmup = true", ema_schema)); })
                 .find("ema.warmup (test.toml:2) = true has no effect") == 0u);

  // The warmup's decay, as tf.train.ExponentialMovingAverage with num_updates: (1 + n) / (10 + n)
  // until it reaches the configured decay.
  kiln::train::EmaOptions o;
  o.decay = 0.9;
  BOOST_TEST(kiln::train::ema_decay_at(o, 1) == 0.9);
  o.warmup = true;
  BOOST_TEST(kiln::train::ema_decay_at(o, 1) == 2.0 / 11.0);
  BOOST_TEST(kiln::train::ema_decay_at(o, 8) == 0.5);
  BOOST_TEST(kiln::train::ema_decay_at(o, 79) == 80.0 / 89.0);
  BOOST_TEST(kiln::train::ema_decay_at(o, 81) == 0.9);
  BOOST_TEST(kiln::train::ema_decay_at(o, 1000000) == 0.9);
}

// The averaged weights' metrics: named like the test split's with "ema_", the same goals, read
// from their own slots, and only where the run evaluates an average.
BOOST_AUTO_TEST_CASE(the_averaged_weights_metrics_need_a_run_that_evaluates_them) {
  using kiln::train::parse_watched_metric;
  auto error_text = [](const std::function<void()>& f) { return kiln::test::error_text<kiln::ConfigError>(f); };
  const auto loss = parse_watched_metric("eval_ema_loss", "x", "auto", true, true);
  const auto top5 = parse_watched_metric("eval_ema_accuracy_top5", "x", "auto", true, true);
  BOOST_TEST((loss.goal == kiln::train::Goal::min));
  BOOST_TEST((top5.goal == kiln::train::Goal::max));
  BOOST_TEST(kiln::train::is_top_k_metric(top5.name));
  kiln::train::EpochMetrics m;
  m.eval_loss = 0.5;
  m.eval_ema_loss = 0.4;
  m.eval_ema_accuracy_top5 = 0.9;
  BOOST_TEST(loss.of(m) == 0.4);
  BOOST_TEST(top5.of(m) == 0.9);
  BOOST_TEST(parse_watched_metric("eval_loss", "x", "auto", true, true).of(m) == 0.5);
  BOOST_TEST(error_text([&] { parse_watched_metric("eval_ema_accuracy", "early_stop.metric (a.toml:3)", "auto", true,
                                                   false); }) ==
             "early_stop.metric (a.toml:3) = \"eval_ema_accuracy\" is a metric of the averaged weights, and this run "
             "evaluates none: set [ema] decay (with evaluate = true) or watch eval_accuracy");
  BOOST_TEST(error_text([&] { parse_watched_metric("eval_ema_loss", "x", "auto", false, true); })
                 .find("needs an eval split") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
