// The trainer's casts at the model boundary (kiln::train::ComputeBoundary): under fp32 every tensor
// crosses untouched (the same memory, so fp32 training is what it was before); under bf16/fp16 a
// floating batch arrives in the compute dtype with its own shape, integer (u8) batches pass
// through, logits come back to f32 exactly, dlogits go down rounded to nearest; the buffers are
// made once and reused; a model that returns f32 logits under bf16 is told what the contract says.
// Then the Trainer itself trains a cast-free model (the mlp without hidden layers: logistic
// regression, like samples/03) under fp32, bf16 and fp16.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/compute_boundary.hpp"
#include "kiln/train/trainer.hpp"
#include "train_fixture.hpp"

namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using kiln::test::cpu;
using kiln::train::ComputeBoundary;

const kiln::InputSpec kFeatures{{784}, DType::f32, 10};  // the mlp's and logreg's spec

/// A device f32 tensor of `shape` holding 0.1, 0.2, ... (none of them exact in bf16 or f16).
Tensor ramp(const Shape& shape) {
  std::vector<double> v(static_cast<std::size_t>(kiln::shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * static_cast<double>(i % 97 + 1);
  return kiln::test::device_f32(shape, v);
}

/// `v` rounded to bf16, nearest with ties to even (what Backend::cast promises).
double to_bf16(double v) {
  const float f = static_cast<float>(v);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  float r = 0;
  std::memcpy(&r, &bits, 4);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compute_boundary)

BOOST_AUTO_TEST_CASE(fp32_hands_every_tensor_through_in_the_same_memory) {
  ComputeBoundary b;
  b.build(cpu(), DType::f32, kFeatures, 8, "mlp");
  const Tensor x = ramp({5, 1, 28, 28});
  const Tensor logits = ramp({5, 10});
  const Tensor dlogits = ramp({5, 10});
  const Tensor xi = b.input(x), lo = b.logits(logits), dl = b.dlogits(dlogits);
  BOOST_TEST(xi.data() == x.data());
  BOOST_TEST((xi.shape() == x.shape() && xi.dtype() == DType::f32));
  BOOST_TEST(lo.data() == logits.data());
  BOOST_TEST(dl.data() == dlogits.data());
}

BOOST_AUTO_TEST_CASE(bf16_casts_floating_input_in_its_own_shape_into_one_buffer) {
  ComputeBoundary b;
  b.build(cpu(), DType::bf16, kFeatures, 8, "mlp");
  // The data source's (1, 28, 28) stands for the model's (784): the model reshapes, as under fp32.
  const Tensor x = ramp({5, 1, 28, 28});
  const Tensor xi = b.input(x);
  BOOST_TEST((xi.dtype() == DType::bf16));
  BOOST_TEST((xi.shape() == Shape{5, 1, 28, 28}));
  const auto want = kiln::test::read(x), got = kiln::test::read(xi);
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) BOOST_TEST_REQUIRE(got[i] == to_bf16(want[i]), "element " << i);
  BOOST_TEST(got[0] == 0.10009765625);  // 0.1 to nearest bf16

  // A smaller (last) batch and a full one reuse the buffer made by build(); more rows than
  // max_batch is a contract violation, not a silent reallocation.
  const Tensor tail = b.input(ramp({3, 784}));
  BOOST_TEST(tail.data() == xi.data());
  BOOST_TEST((tail.shape() == Shape{3, 784}));
  BOOST_TEST(b.input(ramp({8, 784})).data() == xi.data());
  BOOST_TEST(kiln::test::error_text<kiln::BackendError>([&] { b.input(ramp({9, 784})); }) ==
             "model 'mlp': input f32(9, 784) has 9 rows, but the trainer sized its casts for 1..8");
  BOOST_TEST(kiln::test::error_text<kiln::BackendError>([&] { b.input(ramp({4, 100})); }) ==
             "model 'mlp': input f32(4, 100) is not 4 floating samples of 784 elements each, as the model's "
             "input_spec() declared; check the data source against the model");
}

BOOST_AUTO_TEST_CASE(integer_input_passes_through_and_is_the_models_to_normalise) {
  ComputeBoundary b;
  b.build(cpu(), DType::bf16, kiln::InputSpec{{32, 32, 3}, DType::u8, 10}, 4, "resnet");
  const Tensor bytes = cpu().allocate({4, 32, 32, 3}, DType::u8, kiln::MemoryKind::device);
  const Tensor xi = b.input(bytes);
  BOOST_TEST(xi.data() == bytes.data());
  BOOST_TEST((xi.dtype() == DType::u8));
}

BOOST_AUTO_TEST_CASE(logits_come_back_to_f32_exactly_and_dlogits_go_down_rounded) {
  ComputeBoundary b;
  b.build(cpu(), DType::f16, kFeatures, 8, "mlp");
  // Logits in f16 (as the model's head returns them) widen to f32 without loss.
  const Tensor low = cpu().allocate({5, 10}, DType::f16, kiln::MemoryKind::device);
  cpu().cast(low, ramp({5, 10}));
  const Tensor wide = b.logits(low);
  BOOST_TEST((wide.dtype() == DType::f32 && wide.shape() == Shape{5, 10}));
  BOOST_TEST(kiln::test::read(wide) == kiln::test::read(low));
  BOOST_TEST(b.logits(low).data() == wide.data());  // the same buffer every step

  // The loss gradient narrows to f16: 0.1 rounds, 1e-8 is below f16's smallest subnormal (which
  // is why fp16's loss scale is applied in f32, before this cast), 65536 overflows.
  const Tensor d32 = kiln::test::device_f32({2, 10}, {0.1, 1e-8, 65536.0, 0.5, 0, 0, 0, 0, 0, 0,
                                                     0, 0, 0, 0, 0, 0, 0, 0, 0, -2.0});
  const Tensor d16 = b.dlogits(d32);
  BOOST_TEST((d16.dtype() == DType::f16 && d16.shape() == Shape{2, 10}));
  const auto got = kiln::test::read(d16);
  BOOST_TEST(got[0] == 0.0999755859375);
  BOOST_TEST(got[1] == 0.0);
  BOOST_TEST(std::isinf(got[2]));
  BOOST_TEST(got[3] == 0.5);
  BOOST_TEST(got[19] == -2.0);
}

BOOST_AUTO_TEST_CASE(f32_logits_under_bf16_name_the_model_and_the_contract) {
  ComputeBoundary b;
  b.build(cpu(), DType::bf16, kFeatures, 8, "old-model");
  BOOST_TEST(kiln::test::error_text<kiln::BackendError>([&] { b.logits(ramp({5, 10})); }) ==
             "model 'old-model' returned logits f32(5, 10), but a model returns them in the compute dtype "
             "bf16 (kiln/model.hpp); the trainer casts them to f32 for the loss");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

using Run = kiln::test::PluginRun;

/// Trains the mlp without hidden layers (logistic regression, no casts in it) for one epoch on
/// 3200 Fashion-MNIST samples under `precision` ([precision] keys `body`); the result holds the
/// accuracy on 1000 test samples.
kiln::train::TrainResult train_logistic(const std::string& precision, const std::string& body = "") {
  Run run;
  using R = kiln::plugin::Registry;
  run.parts.backend = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  run.parts.comm = run.make(KILN_KIND_COMMUNICATOR, "local", "", &R::create_communicator);
  run.parts.precision = run.make(KILN_KIND_PRECISION, precision, body, &R::create_precision);
  run.parts.model = run.make(KILN_KIND_MODEL, "mlp", "hidden = []", &R::create_model);
  run.parts.train_data = run.make(KILN_KIND_DATA, "mnist", "limit = 3200", &R::create_data);
  run.parts.eval_data = run.make(KILN_KIND_DATA, "mnist", "split = \"test\"\nlimit = 1000", &R::create_data);
  kiln::CommContext cc;
  cc.backend = run.parts.backend.get();
  run.parts.comm->connect(cc);

  kiln::train::TrainerOptions o;
  o.epochs = 1;
  o.seed = 7;
  o.train_loader.shard.batch = 32;
  o.train_loader.shard.seed = 7;
  o.eval_loader.shard.batch = 100;  // larger than the train batch: the casts are sized for both
  o.optimizer_type = "adam";
  o.optimizer_table = kiln::test::core_table("optimizer", "lr = 0.01", kiln::train::optimizer_schema("adam"));
  o.schedule_type = "cosine";
  o.schedule_table = kiln::test::core_table("schedule", "", kiln::train::schedule_schema("constant"));
  o.progress = kiln::io::Progress::Mode::never;
  kiln::train::Trainer trainer(run.parts, o, kiln::RankInfo{}, nullptr);
  return trainer.run();
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_trainer_trains_a_cast_free_model_in_fp32_bf16_and_fp16) {
  const auto fp32 = train_logistic("fp32");
  BOOST_TEST_MESSAGE("logistic regression, 3200 samples: test accuracy fp32 " << fp32.final_eval_accuracy);
  BOOST_TEST(fp32.final_eval_accuracy > 0.70);
  // allow_emulated: the casts, not the speed, are under test, so a CPU without native bf16 runs it too.
  for (const auto& [policy, body] : {std::pair<std::string, std::string>{"bf16", "allow_emulated = true"},
                                     std::pair<std::string, std::string>{"fp16", ""}}) {
    const auto low = train_logistic(policy, body);
    BOOST_TEST_MESSAGE("logistic regression, 3200 samples: test accuracy " << policy << " " << low.final_eval_accuracy);
    // Rounding costs a 16-bit run little on this convex model; a missing cast costs everything.
    BOOST_TEST(low.final_eval_accuracy > 0.70, policy);
    BOOST_TEST(std::abs(low.final_eval_accuracy - fp32.final_eval_accuracy) < 0.03, policy);
    BOOST_TEST(std::isfinite(low.final_train_loss), policy);
  }
}
