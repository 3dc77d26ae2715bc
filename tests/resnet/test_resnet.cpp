// The `resnet` model and `synthetic` data plugins: parameter names, shapes, counts and flags
// against torchvision (resnet50_names.txt, written by make_resnet50_names.py), config errors,
// a backend without the CNN ops refused at build, and the synthetic source's determinism.
// The layer gradient checks and the training run are in cnn_gradcheck.cpp / resnet_training.cpp.
#define KILN_TEST_MODULE test_resnet
#include "kiln_test_main.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/plugin_abi.h"
#include "nn_fixture.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::test::error_text;
using kiln::test::plugin_params;

struct Entry {
  std::string kind, name;
  kiln::Shape shape;
};

struct NameList {
  std::vector<Entry> params, buffers;
  std::int64_t total = 0;
};

NameList load_names() {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/resnet/resnet50_names.txt";
  std::ifstream in(path);
  BOOST_TEST_REQUIRE(in.good(), "cannot open " << path);
  NameList list;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    Entry e;
    ls >> e.kind >> e.name;
    if (e.kind == "total_parameters") {
      list.total = std::stoll(e.name);
      continue;
    }
    std::string dims;
    ls >> dims;
    std::istringstream ds(dims);
    for (std::string d; std::getline(ds, d, ',');) e.shape.push_back(std::stoll(d));
    (e.kind == "param" ? list.params : list.buffers).push_back(e);
  }
  return list;
}

std::int64_t declared_total(const kiln::nn::ParameterStore& store) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < store.parameters().size(); ++i) total += kiln::shape_numel(store.declared_shape(i));
  return total;
}

}  // namespace

BOOST_AUTO_TEST_CASE(resnet50_has_torchvisions_parameter_names_shapes_and_count) {
  const NameList want = load_names();
  BOOST_TEST(want.total == 25557032);
  const auto model = kiln::test::make_resnet("depth = 50\nnum_classes = 1000");
  const kiln::nn::ParameterStore& store = model->store();
  BOOST_TEST(declared_total(store) == 25557032);
  BOOST_TEST_REQUIRE(store.parameters().size() == want.params.size());
  for (std::size_t i = 0; i < want.params.size(); ++i) {
    BOOST_TEST(store[i].name == want.params[i].name, "parameter " << i);
    BOOST_TEST(kiln::shape_string(store.declared_shape(i)) == kiln::shape_string(want.params[i].shape),
               want.params[i].name);
  }
}

BOOST_AUTO_TEST_CASE(batchnorm_and_bias_parameters_are_exempt_from_weight_decay) {
  const auto model = kiln::test::make_resnet("depth = 50");
  int exempt = 0;
  for (const kiln::Parameter& p : model->store().parameters()) {
    const bool is_bn = p.name.find(".bn") != std::string::npos || p.name.rfind("bn1.", 0) == 0 ||
                       p.name.find("downsample.1.") != std::string::npos;
    const bool want_exempt = is_bn || p.name == "fc.bias";
    BOOST_TEST(((p.flags & kiln::kParamNoWeightDecay) != 0) == want_exempt, p.name);
    exempt += want_exempt ? 1 : 0;
  }
  BOOST_TEST(exempt == 2 * 53 + 1);  // 53 batch norms (gamma, beta) and fc.bias
}

BOOST_AUTO_TEST_CASE(every_depth_matches_torchvision_parameter_count) {
  const std::pair<int, std::int64_t> counts[] = {
      {18, 11689512}, {34, 21797672}, {50, 25557032}, {101, 44549160}, {152, 60192808}};
  for (const auto& [depth, count] : counts) {
    const auto model = kiln::test::make_resnet("depth = " + std::to_string(depth));
    BOOST_TEST(declared_total(model->store()) == count, "depth " << depth);
  }
  // torchvision resnet18(num_classes=10).
  BOOST_TEST(declared_total(kiln::test::make_resnet("depth = 18\nnum_classes = 10")->store()) == 11181642);
}

BOOST_AUTO_TEST_CASE(width_scales_every_stage_and_rounds) {
  const auto model = kiln::test::make_resnet("depth = 18\nwidth = 0.25\nnum_classes = 10");
  const kiln::nn::ParameterStore& store = model->store();
  BOOST_TEST(kiln::shape_string(store.declared_shape(0)) == "(16, 3, 7, 7)");
  const auto& last = store.declared_shape(store.parameters().size() - 2);  // fc.weight
  BOOST_TEST(kiln::shape_string(last) == "(10, 128)");
  const auto half = kiln::test::make_resnet("depth = 50\nwidth = 0.3");  // 19.2 -> 19, 38.4 -> 38 ...
  BOOST_TEST(kiln::shape_string(half->store().declared_shape(0)) == "(19, 3, 7, 7)");
  BOOST_TEST(half->input_spec().num_classes == 1000);
  BOOST_TEST(kiln::shape_string(half->input_spec().sample_shape) == "(3, 224, 224)");
}

BOOST_AUTO_TEST_CASE(zero_init_residual_zeroes_the_last_gamma_of_each_block_only,
                     *boost::unit_test::precondition(kiln::test::cnn_ops_available)) {
  auto model = kiln::test::make_resnet("depth = 50\nwidth = 0.0625\nimage_size = 32\nzero_init_residual = true");
  kiln::test::build(*model, 1);
  for (const kiln::Parameter& p : model->parameters()) {
    if (p.name.find("bn") == std::string::npos || p.name.find(".weight") == std::string::npos) continue;
    const auto v = kiln::test::read(p.value);
    const bool zero = p.name.find(".bn3.weight") != std::string::npos;
    for (double x : v) BOOST_TEST(x == (zero ? 0.0 : 1.0), p.name);
  }
}

BOOST_AUTO_TEST_CASE(resnet50_buffers_are_torchvisions_running_stats,
                     *boost::unit_test::precondition(kiln::test::cnn_ops_available)) {
  const NameList want = load_names();
  auto model = kiln::test::make_resnet("depth = 50\nimage_size = 32");
  kiln::test::build(*model, 1);
  const auto buffers = model->buffers();
  BOOST_TEST_REQUIRE(buffers.size() == want.buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    BOOST_TEST(buffers[i].name == want.buffers[i].name);
    BOOST_TEST(buffers[i].value.shape() == want.buffers[i].shape, buffers[i].name);
  }
  BOOST_TEST(kiln::test::read(buffers[0].value)[5] == 0.0);  // bn1.running_mean
  BOOST_TEST(kiln::test::read(buffers[1].value)[5] == 1.0);  // bn1.running_var
  // Parameters keep their names and get tensors of the declared shapes.
  BOOST_TEST(model->parameters()[0].value.shape() == (kiln::Shape{64, 3, 7, 7}));
}

BOOST_AUTO_TEST_CASE(bad_model_parameters_are_config_errors_naming_the_key) {
  using kiln::ConfigError;
  BOOST_TEST(error_text<ConfigError>([] { kiln::test::make_resnet("depth = 42"); }) ==
             "model.depth (test.toml:2) = 42 is not a ResNet depth; use 18, 34, 50, 101 or 152");
  BOOST_TEST(error_text<ConfigError>([] { kiln::test::make_resnet("image_size = 16"); }) ==
             "test.toml:2:14: [model] image_size = 16 is out of range: it must be >= 32");
  BOOST_TEST(error_text<ConfigError>([] { kiln::test::make_resnet("width = 0.0"); }) ==
             "test.toml:2:9: [model] width = 0 is out of range: it must be in (0, 64]");
  BOOST_TEST(error_text<ConfigError>([] { kiln::test::make_resnet("num_classes = 1"); }) ==
             "test.toml:2:15: [model] num_classes = 1 is out of range: it must be >= 2");
}

BOOST_AUTO_TEST_CASE(a_backend_without_conv_is_refused_at_build_naming_the_op) {
  kiln::test::NoConvBackend no_conv;
  auto model = kiln::test::make_resnet("depth = 18\nwidth = 0.25\nimage_size = 32");
  kiln::ModelBuildContext ctx;
  ctx.backend = &no_conv;
  ctx.max_batch = 2;
  BOOST_TEST(error_text<kiln::UnsupportedError>([&] { model->build(ctx); }) ==
             "Conv2d needs op conv2d_forward for f32, which backend 'no-conv' does not implement");
}

// ---- synthetic data --------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(synthetic_samples_are_deterministic_normalish_and_labelled) {
  const auto src = kiln::test::make_synthetic("shape = [3, 8, 8]\nclasses = 7\ncount = 100\nseed = 5");
  const kiln::DatasetInfo info = src->describe();
  BOOST_TEST(info.sample_shape == (kiln::Shape{3, 8, 8}));
  BOOST_TEST(info.num_classes == 7);
  BOOST_TEST(info.count == 100);
  BOOST_TEST((info.sample_dtype == kiln::DType::f32));

  std::vector<float> a(192), b(192);
  std::int32_t la = -1, lb = -1;
  src->read(3, 111, kiln::SampleSlot{a.data(), a.size() * 4, &la});
  src->read(3, 999, kiln::SampleSlot{b.data(), b.size() * 4, &lb});  // loader seed is ignored
  BOOST_TEST(a == b);
  BOOST_TEST(la == lb);
  src->read(4, 111, kiln::SampleSlot{b.data(), b.size() * 4, &lb});
  BOOST_TEST(a != b);

  // Moments over many samples, and every label in range with every class seen.
  double sum = 0, sq = 0;
  std::vector<int> seen(7, 0);
  for (std::int64_t i = 0; i < 100; ++i) {
    std::int32_t label = -1;
    src->read(i, 0, kiln::SampleSlot{a.data(), a.size() * 4, &label});
    BOOST_TEST_REQUIRE((label >= 0 && label < 7));
    ++seen[static_cast<std::size_t>(label)];
    for (float x : a) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
  }
  const double n = 100.0 * 192.0;
  BOOST_TEST(std::abs(sum / n) < 0.02);
  BOOST_TEST(std::abs(sq / n - 1.0) < 0.03);
  for (int c : seen) BOOST_TEST(c > 0);

  // Another seed gives other data.
  const auto other = kiln::test::make_synthetic("shape = [3, 8, 8]\nclasses = 7\ncount = 100\nseed = 6");
  other->read(3, 111, kiln::SampleSlot{b.data(), b.size() * 4, &lb});
  src->read(3, 111, kiln::SampleSlot{a.data(), a.size() * 4, &la});
  BOOST_TEST(a != b);
}

BOOST_AUTO_TEST_CASE(synthetic_defaults_and_errors) {
  const auto src = kiln::test::make_synthetic("");
  BOOST_TEST(src->describe().sample_shape == (kiln::Shape{3, 224, 224}));
  BOOST_TEST(src->describe().num_classes == 1000);
  BOOST_TEST(src->describe().count == 10000);
  std::vector<float> small(10);
  std::int32_t label = 0;
  BOOST_TEST(error_text<kiln::DataError>([&] { src->read(0, 0, kiln::SampleSlot{small.data(), 40, &label}); }) ==
             "synthetic: sample 0 needs a 602112-byte buffer and a label slot, got 40 bytes");
  BOOST_TEST(error_text<kiln::DataError>([&] { src->read(10000, 0, kiln::SampleSlot{small.data(), 40, &label}); }) ==
             "synthetic: sample index 10000 is outside [0, 10000) (data count)");
  BOOST_TEST(error_text<kiln::ConfigError>([] { kiln::test::make_synthetic("shape = [3, 0, 4]"); }) ==
             "test.toml:2:13: [data] shape[1] = 0 is out of range: it must be >= 1");
  BOOST_TEST(error_text<kiln::ConfigError>([] { kiln::test::make_synthetic("count = 0"); }) ==
             "test.toml:2:9: [data] count = 0 is out of range: it must be >= 1");
}
