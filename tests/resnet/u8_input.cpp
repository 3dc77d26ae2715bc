// The u8 image path: the `synthetic` source's output = "u8" ((H, W, C) bytes, deterministic),
// the `resnet` model's input = "u8" (InputSpec, normalize_image on the backend, mean/std
// parameters), the same bytes through the u8 and the f32 model giving the same logits, the
// plugins' own errors for bad values, and the core's wiring error when data and model disagree.
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/train/run.hpp"
#include "nn_fixture.hpp"
#include "resnet_test_util.hpp"

namespace {

using kiln::test::cpu;
using kiln::test::error_text;

/// `toml_body` validated against the plugin's schema, then `key` forced to `value` (what the
/// schema's choices would refuse), so the plugin's own check is what throws.
kiln::ParamMap with_forced(std::uint32_t kind, const char* name, const std::string& toml_body, const char* key,
                           const std::string& value) {
  kiln::ParamMap p = kiln::test::plugin_params(kind, name, toml_body);
  p.set(key, value, "test");
  return p;
}

std::vector<std::uint8_t> read_u8(const kiln::DataSource& src, std::int64_t index, std::int32_t& label) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(kiln::shape_numel(src.describe().sample_shape)));
  src.read(index, 0, kiln::SampleSlot{bytes.data(), bytes.size(), &label});
  return bytes;
}

}  // namespace

// ---- synthetic output = "u8" -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(synthetic_u8_samples_are_hwc_bytes_deterministic_and_spread) {
  const auto src = kiln::test::make_synthetic("shape = [3, 8, 10]\nclasses = 7\ncount = 50\nseed = 5\noutput = \"u8\"");
  const kiln::DatasetInfo info = src->describe();
  BOOST_TEST(info.sample_shape == (kiln::Shape{8, 10, 3}));
  BOOST_TEST((info.sample_dtype == kiln::DType::u8));
  BOOST_TEST(info.description == "synthetic 50 samples of (8, 10, 3) u8, 7 classes, seed 5");

  std::int32_t la = -1, lb = -1;
  const auto a = read_u8(*src, 3, la);
  std::vector<std::uint8_t> b(a.size());
  src->read(3, 999, kiln::SampleSlot{b.data(), b.size(), &lb});  // loader seed ignored
  BOOST_TEST(a == b);
  BOOST_TEST(la == lb);
  // Labels are those of the f32 source with the same seed (one label stream for both outputs).
  const auto f32 = kiln::test::make_synthetic("shape = [3, 8, 10]\nclasses = 7\ncount = 50\nseed = 5");
  BOOST_TEST(f32->label_of(3) == la);
  BOOST_TEST(read_u8(*src, 4, lb) != a);

  // Uniform bytes: mean ~127.5 over many samples, and both ends of the range appear.
  double sum = 0;
  int lo = 255, hi = 0;
  for (std::int64_t i = 0; i < 50; ++i) {
    for (std::uint8_t v : read_u8(*src, i, la)) {
      sum += v;
      lo = std::min<int>(lo, v);
      hi = std::max<int>(hi, v);
    }
  }
  BOOST_TEST(std::abs(sum / (50.0 * 240.0) - 127.5) < 3.0);
  BOOST_TEST(lo == 0);
  BOOST_TEST(hi == 255);
}

BOOST_AUTO_TEST_CASE(synthetic_output_errors) {
  const auto src = kiln::test::make_synthetic("shape = [3, 4, 4]\noutput = \"u8\"");
  std::vector<float> f(48);
  std::int32_t label = 0;
  BOOST_TEST(error_text<kiln::DataError>([&] { src->read(0, 0, kiln::SampleSlot{f.data(), 192, &label}); }) ==
             "synthetic: sample 0 needs a 48-byte buffer and a label slot, got 192 bytes");
  BOOST_TEST(error_text<kiln::ConfigError>([] { kiln::test::make_synthetic("shape = [48]\noutput = \"u8\""); }) ==
             "data.shape (test.toml:2) has 1 dimensions but data.output (test.toml:3) = \"u8\" makes images: give "
             "[C, H, W], e.g. [3, 224, 224] (samples are then (H, W, C) u8)");
  // The schema's choices refuse a bad value first; the plugin checks it too.
  const std::string schema = error_text<kiln::ConfigError>([] { kiln::test::make_synthetic("output = \"f16\""); });
  BOOST_TEST(schema.find("output = 'f16' is not one of f32, u8") != std::string::npos, schema);
  const kiln::ParamMap forced = with_forced(KILN_KIND_DATA, "synthetic", "", "output", "f16");
  kiln::PluginArgs args;
  args.params = &forced;
  BOOST_TEST(error_text<kiln::ConfigError>([&] { kiln::synthetic::SyntheticSource{args}; }) ==
             "data.output (test) = \"f16\" is not a sample type; use \"f32\" (normalised-like values in `shape`) or "
             "\"u8\" (raw bytes, (H, W, C) for shape [C, H, W])");
}

// ---- resnet input = "u8" ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(resnet_u8_input_spec_and_parameter_errors) {
  const auto f32 = kiln::test::make_resnet("depth = 18\nimage_size = 64");
  BOOST_TEST(f32->input_spec().sample_shape == (kiln::Shape{3, 64, 64}));
  BOOST_TEST((f32->input_spec().dtype == kiln::DType::f32));
  BOOST_TEST((f32->input_kind() == kiln::resnet::InputKind::f32));
  const auto u8 = kiln::test::make_resnet("depth = 18\nimage_size = 64\ninput = \"u8\"");
  BOOST_TEST(u8->input_spec().sample_shape == (kiln::Shape{64, 64, 3}));
  BOOST_TEST((u8->input_spec().dtype == kiln::DType::u8));
  BOOST_TEST(u8->input_spec().num_classes == 1000);
  // Defaults are the ImageNet statistics.
  BOOST_TEST(u8->normalization().mean[0] == 0.485f);
  BOOST_TEST(u8->normalization().mean[2] == 0.406f);
  BOOST_TEST(u8->normalization().std[1] == 0.224f);
  const auto custom = kiln::test::make_resnet("depth = 18\ninput = \"u8\"\nmean = [0.5, 0.5, 0.5]\nstd = [0.25, 0.5, 1]");
  BOOST_TEST(custom->normalization().mean[1] == 0.5f);
  BOOST_TEST(custom->normalization().std[2] == 1.0f);

  BOOST_TEST(error_text<kiln::ConfigError>([] { kiln::test::make_resnet("input = \"u8\"\nin_channels = 1"); }) ==
             "model.in_channels (test.toml:3) = 1 but model.input (test.toml:2) = \"u8\" takes RGB (H, W, 3) bytes; "
             "set in_channels = 3");
  BOOST_TEST(error_text<kiln::ConfigError>([] { kiln::test::make_resnet("mean = [0.5, 0.5]"); }) ==
             "model.mean (test.toml:2) has 2 values; give one per RGB channel (3)");
  BOOST_TEST(error_text<kiln::ConfigError>([] { kiln::test::make_resnet("std = [0.2, 0.0, 0.2]"); }) ==
             "test.toml:2:13: [model] std[1] = 0 is out of range: it must be > 0");
  const kiln::ParamMap forced = with_forced(KILN_KIND_MODEL, "resnet", "", "input", "f16");
  kiln::PluginArgs args;
  args.params = &forced;
  BOOST_TEST(error_text<kiln::ConfigError>([&] { kiln::resnet::ResnetModel{args}; }) ==
             "model.input (test) = \"f16\" is not an input kind; use \"f32\" (normalised (C, H, W) images) or "
             "\"u8\" (raw (H, W, 3) bytes, normalised by the model)");
}

BOOST_AUTO_TEST_CASE(resnet_input_kind_and_tensor_dtype_must_agree) {
  auto model = kiln::test::make_resnet("depth = 18\nwidth = 0.125\nimage_size = 32\nnum_classes = 4\ninput = \"u8\"");
  kiln::test::build(*model, 2);
  const kiln::Tensor x = cpu().allocate({2, 3, 32, 32}, kiln::DType::f32, kiln::MemoryKind::device);
  BOOST_TEST(error_text<kiln::BackendError>([&] { model->forward(x, kiln::Mode::eval, 0); }) ==
             "resnet: input f32(2, 3, 32, 32) is not 2 u8 images of 32x32x3 (model.input = \"u8\"); give the data "
             "source output = \"u8\" and model.image_size its size");
  // And the f32 model refuses bytes, pointing at model.input.
  auto plain = kiln::test::make_resnet("depth = 18\nwidth = 0.125\nimage_size = 32\nnum_classes = 4");
  kiln::test::build(*plain, 2);
  const kiln::Tensor bytes = cpu().allocate({2, 32, 32, 3}, kiln::DType::u8, kiln::MemoryKind::device);
  BOOST_TEST(error_text<kiln::BackendError>([&] { plain->forward(bytes, kiln::Mode::eval, 0); }).find(
                 "(model.input = \"u8\" for byte images)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(resnet_u8_path_matches_the_f32_path_on_the_same_bytes,
                     *boost::unit_test::precondition(kiln::test::cnn_ops_available)) {
  // 64 px and 4 images, so the last stage's train-mode batch statistics average 16 values per
  // channel (at 32 px and 3 images they average 3, which amplifies f32 rounding noise).
  constexpr std::int64_t kBatch = 4, kSize = 64;
  const std::string arch = "depth = 18\nwidth = 0.25\nimage_size = 64\nnum_classes = 10\n";
  auto f32_model = kiln::test::make_resnet(arch);
  auto u8_model = kiln::test::make_resnet(arch + "input = \"u8\"");
  kiln::test::build(*f32_model, kBatch);  // same seed and names: the same initial parameters
  kiln::test::build(*u8_model, kBatch);
  const auto src = kiln::test::make_synthetic("shape = [3, 64, 64]\ncount = 8\nseed = 3\noutput = \"u8\"");

  // The same bytes: as (B, H, W, 3) u8 for one model, normalised on the host to (B, 3, H, W) f32
  // with the literal formula in double for the other.
  const std::int64_t per = kSize * kSize * 3;
  kiln::Tensor hu = kiln::host_tensor({kBatch, kSize, kSize, 3}, kiln::DType::u8);
  kiln::Tensor hf = kiln::host_tensor({kBatch, 3, kSize, kSize}, kiln::DType::f32);
  const double mean[3] = {0.485, 0.456, 0.406}, stdev[3] = {0.229, 0.224, 0.225};
  for (std::int64_t i = 0; i < kBatch; ++i) {
    std::int32_t label = 0;
    std::uint8_t* img = hu.data_as<std::uint8_t>() + i * per;
    src->read(i, 0, kiln::SampleSlot{img, static_cast<std::size_t>(per), &label});
    for (std::int64_t y = 0; y < kSize; ++y) {
      for (std::int64_t x = 0; x < kSize; ++x) {
        for (int c = 0; c < 3; ++c) {
          const double v = img[(y * kSize + x) * 3 + c] / 255.0;
          hf.data_as<float>()[((i * 3 + c) * kSize + y) * kSize + x] = static_cast<float>((v - mean[c]) / stdev[c]);
        }
      }
    }
  }
  const kiln::Tensor du = cpu().allocate(hu.shape(), kiln::DType::u8, kiln::MemoryKind::device);
  const kiln::Tensor df = cpu().allocate(hf.shape(), kiln::DType::f32, kiln::MemoryKind::device);
  cpu().copy(hu, du);
  cpu().copy(hf, df);

  for (kiln::Mode mode : {kiln::Mode::eval, kiln::Mode::train}) {
    const std::vector<double> want = kiln::test::read(f32_model->forward(df, mode, 0));
    const std::vector<double> got = kiln::test::read(u8_model->forward(du, mode, 0));
    BOOST_TEST_REQUIRE(got.size() == static_cast<std::size_t>(kBatch * 10));
    double scale = 0, worst = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (std::size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::abs(got[k] - want[k]));
    BOOST_TEST_MESSAGE("mode " << static_cast<int>(mode) << ": max |logit| " << scale << ", max diff " << worst);
    BOOST_TEST(scale > 0.0);
    BOOST_TEST(worst <= 1e-5 * scale, "max diff " << worst << " vs max |logit| " << scale);
  }
}

// ---- the core's wiring check -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(u8_data_into_an_f32_model_fails_with_the_wiring_error) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("kiln-resnet-u8-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto run = [&](const std::string& model_input, const std::string& data_output) {
    const fs::path config = dir / "run.toml";
    std::ofstream(config) << fmt::format(
        "[run]\nepochs = 1\n[backend]\ntype = \"cpu\"\n[model]\ntype = \"resnet\"\ndepth = 18\nwidth = 0.125\n"
        "image_size = 32\nnum_classes = 10\ninput = \"{}\"\n[data.train]\ntype = \"synthetic\"\nshape = [3, 32, 32]\n"
        "classes = 10\ncount = 4\noutput = \"{}\"\n[loader]\nbatch = 2\n[comm]\ntype = \"local\"\n"
        "[precision]\ntype = \"fp32\"\n[optimizer]\ntype = \"sgd\"\nlr = 0.01\n",
        model_input, data_output);
    kiln::train::TrainCommand command;
    command.config = config;
    command.run_dir = (dir / fmt::format("run-{}-{}", model_input, data_output)).string();
    command.plugin_dirs = {fs::path(KILN_TEST_PLUGIN_DIR)};
    kiln::train::run_training(command);
  };
  BOOST_TEST(error_text<kiln::ConfigError>([&] { run("f32", "u8"); }) ==
             "the model expects samples of f32 (3, 32, 32), but [data.train] produces u8 (32, 32, 3)");
  BOOST_TEST(error_text<kiln::ConfigError>([&] { run("u8", "f32"); }) ==
             "the model expects samples of u8 (32, 32, 3), but [data.train] produces f32 (3, 32, 32)");
  std::error_code ec;
  fs::remove_all(dir, ec);
}
