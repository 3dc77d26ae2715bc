// Unit tests of the CRC-32C TFRecord framing uses (the core's) (both paths, the published vector, the TFRecord mask) and
// of the hand-written tf.train.Example parser's bounds checks.
#define KILN_TEST_MODULE test_imagenet_crc32c
#include "kiln_test_main.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "example_proto.hpp"
#include "fixtures.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/crc32c.hpp"

using kiln::io::crc32c;
using kiln::io::crc32c_portable;

BOOST_AUTO_TEST_CASE(known_vector_both_paths) {
  const char* text = "123456789";
  BOOST_TEST(crc32c(text, 9) == 0xE3069283u);
  BOOST_TEST(crc32c_portable(text, 9) == 0xE3069283u);
  BOOST_TEST(crc32c("", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(hardware_and_table_agree_on_all_lengths_and_alignments) {
  std::vector<unsigned char> data(300);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 37 + 11);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n = 0; n + offset <= data.size(); n += 7) {
      BOOST_TEST(crc32c(data.data() + offset, n) == crc32c_portable(data.data() + offset, n));
    }
  }
}

BOOST_AUTO_TEST_CASE(mask_matches_tensorflow) {
  // TensorFlow: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
  BOOST_TEST(kiln::io::masked_crc32c("", 0) == 0xa282ead8u);  // crc32c("") == 0
  BOOST_TEST(kiln::io::masked_crc32c("123456789", 9) ==
             static_cast<std::uint32_t>(((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u));
}

BOOST_AUTO_TEST_CASE(example_parses_image_and_label) {
  const kiln_test::Bytes image = {0xFF, 0xD8, 1, 2, 3};
  const kiln_test::Bytes example = kiln_test::make_example(image, 417);
  const auto fields = kiln::imagenet::parse_example(example, "rec");
  BOOST_TEST(fields.has_image);
  BOOST_TEST(std::vector<unsigned char>(fields.image.begin(), fields.image.end()) == image);
  BOOST_REQUIRE(fields.label.has_value());
  BOOST_TEST(*fields.label == 417);
}

BOOST_AUTO_TEST_CASE(example_without_image_has_no_image) {
  const auto example = kiln_test::make_example_without_image(3);
  const auto fields = kiln::imagenet::parse_example(example, "rec");
  BOOST_TEST(!fields.has_image);
  BOOST_TEST(*fields.label == 3);
}

BOOST_AUTO_TEST_CASE(every_truncation_of_an_example_fails_cleanly) {
  const kiln_test::Bytes example = kiln_test::make_example(kiln_test::Bytes(40, 7), 5);
  int errors = 0;
  for (std::size_t n = 1; n < example.size(); ++n) {
    try {
      kiln::imagenet::parse_example(std::span(example.data(), n), "shard (record 3 at offset 9)");
    } catch (const kiln::DataError& e) {
      ++errors;
      BOOST_TEST(std::string(e.what()).find("shard (record 3 at offset 9): malformed tf.train.Example") == 0);
    }
  }
  // A cut exactly between top-level fields is a valid, shorter Example; every other cut fails.
  BOOST_TEST(errors > static_cast<int>(example.size()) / 2);
}
