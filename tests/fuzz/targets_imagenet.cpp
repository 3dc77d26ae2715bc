// The `imagenet` plugin's readers (compiled in): a sample from a JPEG (header, region decode by
// libjpeg-turbo, crop and resampling), tf.train.Example records, TFRecord shards with their CRCs,
// and the class names file.
#include <filesystem>

#include "../imagenet/fixtures.hpp"
#include "class_names_file.hpp"
#include "example_proto.hpp"
#include "fuzz_target.hpp"
#include "kiln/errors.hpp"
#include "sample_decode.hpp"
#include "tfrecord_index.hpp"

namespace kiln::fuzz {
namespace {

constexpr const char* kJpegName = "fuzz.jpg";

/// The sizes a sample is made at here: small, so each run is quick; the crop and scale choices
/// follow them as they would at 224.
constexpr int kSize = 24;

/// Makes the samples a training run and an evaluation make from `bytes` (the plugin's own
/// decode_sample), and checks the output: resampling is a convex combination of pixels, so every
/// normalised value lies within what the bytes 0 and 255 normalise to.
void decode_like_the_plugin(Input bytes) {
  std::vector<unsigned char> rgb;
  imagenet::TransformOptions train;
  train.size = kSize;
  std::vector<float> pixels(3 * kSize * kSize);
  for (const std::uint64_t seed : {1u, 2u}) {
    // The plugin's default cap is 2^28 pixels; a lower one keeps each run fast.
    imagenet::decode_sample(bytes, kJpegName, train, std::int64_t{1} << 22, /*decode_scaled=*/true, seed, rgb,
                            pixels.data());
    for (std::size_t i = 0; i < pixels.size(); ++i) {
      const std::size_t c = i / (kSize * kSize);
      const float lo = (0.0f - train.mean[c]) / train.std[c], hi = (1.0f - train.mean[c]) / train.std[c];
      if (!(pixels[i] >= lo - 1e-4f && pixels[i] <= hi + 1e-4f))
        finding("decode_sample wrote " + std::to_string(pixels[i]) + " in channel " + std::to_string(c) +
                ", outside what bytes normalise to");
    }
  }
  imagenet::TransformOptions eval = train;
  eval.kind = imagenet::TransformKind::eval;
  eval.resize = kSize + kSize / 7;
  eval.format = imagenet::SampleFormat::u8_hwc;
  std::vector<unsigned char> bytes_out(3 * kSize * kSize);
  imagenet::decode_sample(bytes, kJpegName, eval, std::int64_t{1} << 22, /*decode_scaled=*/false, 0, rgb,
                          bytes_out.data());
}

bool run_jpeg(Input input) {
  try {
    decode_like_the_plugin(input);
    return true;
  } catch (const kiln::DataError& e) {
    expect_named(e, kJpegName);
    return false;
  }
}

std::vector<Bytes> jpeg_seeds() {
  std::vector<unsigned char> noise(40 * 23 * 3);
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<unsigned char>((i * 2654435761u) >> 24);
  return {kiln_test::encode_rgb_420(noise, 40, 23, 80), kiln_test::encode_rgb(noise, 40, 23, 95),
          kiln_test::gray_jpeg(9, 17, 100), kiln_test::cmyk_jpeg(16, 8, {200, 10, 60})};
}

// ---- tf.train.Example and TFRecord ------------------------------------------------------------

constexpr const char* kRecordName = "fuzz record";

bool run_example(Input input) {
  try {
    const imagenet::ExampleFields fields = imagenet::parse_example(input, kRecordName);
    const bool inside = fields.image.empty() ||
                        (fields.image.data() >= input.data() &&
                         fields.image.data() + fields.image.size() <= input.data() + input.size());
    if (!inside) finding("parse_example's image span is not inside the record");
    return true;
  } catch (const kiln::DataError& e) {
    expect_named(e, kRecordName);
    return false;
  }
}

std::vector<Bytes> example_seeds() {
  const Bytes jpeg = kiln_test::gray_jpeg(8, 8, 7);
  return {kiln_test::make_example(jpeg, 417), kiln_test::make_example_without_image(-3),
          kiln_test::make_example({}, 0)};
}

/// Input: one TFRecord shard; indexed as a split of one shard, then every record read and parsed.
bool run_tfrecord(Input input) {
  const std::filesystem::path root = std::filesystem::path(scratch_dir()) / "tfrecords";
  std::filesystem::create_directories(root);
  const std::string shard = (root / "train-00000-of-00001").string();
  write_bytes(shard, input);
  try {
    const imagenet::TfRecordIndex index(root, "train", std::uint64_t{1} << 20);
    std::vector<unsigned char> record;
    bool all_read = true;
    for (std::int64_t i = 0; i < index.size(); ++i) {
      try {
        index.read_record(i, record);
        (void)imagenet::parse_example(record, index.where(i));
      } catch (const kiln::DataError& e) {
        expect_named(e, shard);
        all_read = false;
      }
    }
    return all_read;
  } catch (const kiln::DataError& e) {
    expect_named(e, shard);
    return false;
  }
}

std::vector<Bytes> tfrecord_seeds() {
  Bytes two, empty_record;
  kiln_test::append_record(two, kiln_test::make_example(kiln_test::gray_jpeg(8, 8, 7), 1));
  kiln_test::append_record(two, kiln_test::make_example_without_image(2));
  kiln_test::append_record(empty_record, {});
  return {two, empty_record, Bytes{}};
}

/// Input: a class names file for a split of three classes.
bool run_class_names_file(Input input) {
  const std::string path = std::string(scratch_dir()) + "/class-names.txt";
  write_bytes(path, input);
  try {
    expect_valid_class_names(imagenet::read_class_names_file(path, "data.train.class_names_file", 3), 3,
                             "read_class_names_file");
    return true;
  } catch (const kiln::DataError& e) {
    expect_named(e, path);
    return false;
  }
}

std::vector<Bytes> class_names_file_seeds() {
  return {bytes_of("tench, Tinca tinca\ngoldfish\nwhite shark\n"), bytes_of("n01440764\r\nn01443537\r\nn01484850"),
          bytes_of("\xce\xb1\n\xce\xb2\n\xce\xb3\n")};
}

const Target kTargets[] = {
    {"class_names_file", "the imagenet plugin's class_names_file: one class name per line", run_class_names_file,
     class_names_file_seeds},
    {"jpeg", "the imagenet plugin's sample from a JPEG: decode_sample (header, region decode, crop, resampling)",
     run_jpeg, jpeg_seeds},
    {"tf_example", "the imagenet plugin's tf.train.Example parser", run_example, example_seeds},
    {"tfrecord", "the imagenet plugin's TFRecord shards: TfRecordIndex, read_record, parse_example",
     run_tfrecord, tfrecord_seeds},
};

}  // namespace

std::span<const Target> imagenet_targets() { return kTargets; }

}  // namespace kiln::fuzz
