// Tests of the `imagenet` plugin loaded through the registry, on data generated here: an
// ImageFolder tree and TFRecord shards of TurboJPEG-written images in known colours (RGB, gray,
// CMYK, a PNG posing as .JPEG, a truncated JPEG, a gradient, a framed image for eval geometry).
// They assert decoded values after normalisation (JPEG tolerance), labels in both layouts, CRC
// and truncation errors, limits, skip mode and determinism by seed. Nothing here times anything.
#define KILN_TEST_MODULE test_imagenet
#include "kiln_test_main.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

#include "fixtures.hpp"
#include "kiln/errors.hpp"

namespace fs = std::filesystem;
using namespace kiln_test;

namespace {

constexpr Rgb kRed{220, 30, 40};
constexpr Rgb kGreen{20, 200, 60};
constexpr Rgb kBlue{30, 50, 210};
constexpr float kTolerance = 6.0f / 255.0f / 0.224f;  // ~6 grey levels after normalisation

// The generated dataset, shared by every test case (built once per process).
struct Dataset {
  fs::path root;
  Dataset() {
    root = fs::temp_directory_path() / fmt::format("kiln-imagenet-test-{}", ::getpid());
    fs::remove_all(root);
    // ImageFolder: classes sort as n001 (0), n002 (1), n003 (2); files sort within a class.
    const fs::path train = root / "folder" / "train";
    write_file(train / "n002" / "a_red.JPEG", solid_jpeg(64, 48, kRed));         // 2
    write_file(train / "n002" / "b_gray.jpeg", gray_jpeg(40, 40, 128));          // 3
    write_file(train / "n002" / "c_gradient.JPEG", gradient_jpeg(320, 240));     // 4
    write_file(train / "n001" / "a_green.JPEG", solid_jpeg(64, 64, kGreen));     // 0
    write_file(train / "n001" / "b_cmyk.jpg", cmyk_jpeg(48, 48, kBlue));         // 1
    write_file(train / "n001" / "notes.txt", Bytes{'x'});                        // not listed
    Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13};
    write_file(train / "n003" / "x.JPEG", png);                                  // 5
    Bytes truncated = gradient_jpeg(320, 240);
    truncated.resize(truncated.size() / 2);
    write_file(train / "n003" / "y_truncated.JPEG", truncated);                  // 6
    // Eval geometry: 320 x 256 (shorter side 256 = resize, so no scaling): the centre 224 crop
    // is x in [48, 272), y in [16, 240); blue inside, red outside (block-aligned edges).
    write_file(root / "folder" / "val" / "n001" / "framed.JPEG",
               framed_jpeg(320, 256, 48, 16, 272, 240, kBlue, kRed));                 // val 0
    // Large enough that eval decodes at 1/4 scale (crop of 1050 source pixels >= 4 x 224).
    write_file(root / "folder" / "val" / "n002" / "big_gradient.JPEG", gradient_jpeg(1600, 1200));

    // TFRecord: two shards; labels are 1-based.
    Bytes shard0, shard1;
    append_record(shard0, make_example(solid_jpeg(64, 48, kRed), 2));
    append_record(shard0, make_example(solid_jpeg(50, 70, kGreen), 1));
    append_record(shard1, make_example(gradient_jpeg(300, 200), 3));
    append_record(shard1, make_example_without_image(1));
    write_file(root / "tf" / "train-00000-of-00002", shard0);
    write_file(root / "tf" / "train-00001-of-00002", shard1);
  }
  ~Dataset() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

const Dataset& data() {
  static Dataset dataset;
  return dataset;
}

Bytes text_bytes(std::string_view text) { return Bytes(text.begin(), text.end()); }

std::string folder_table(const std::string& extra = "") {
  return fmt::format("root = \"{}\"\n{}", (data().root / "folder").string(), extra);
}

std::string tf_table(const fs::path& root, const std::string& extra = "") {
  return fmt::format("root = \"{}\"\n{}", root.string(), extra);
}

// Every value of channel c equals normalised(colour[c], c) within the JPEG tolerance.
void check_solid(const std::vector<float>& pixels, int size, Rgb colour) {
  const std::size_t plane = static_cast<std::size_t>(size) * size;
  for (int c = 0; c < 3; ++c) {
    const float want = normalised(colour[static_cast<std::size_t>(c)], c);
    float worst = 0;
    for (std::size_t i = 0; i < plane; ++i) {
      worst = std::max(worst, std::abs(pixels[c * plane + i] - want));
    }
    BOOST_TEST(worst < kTolerance, "channel " << c << " deviates by " << worst);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(folder_describe_and_labels_follow_sorted_wnids) {
  auto source = make_source(folder_table());
  const auto info = source->describe();
  BOOST_TEST(info.count == 7);
  BOOST_TEST(info.num_classes == 3);
  BOOST_TEST((info.sample_shape == kiln::Shape{3, 224, 224}));
  BOOST_TEST(contains(info.description, "train transform"));
  std::int32_t label = -1;
  const int expected[] = {0, 0, 1, 1, 1};
  for (int i = 0; i < 5; ++i) {
    read_sample(*source, i, 7, label);
    BOOST_TEST(label == expected[i], "sample " << i);
  }
}

BOOST_AUTO_TEST_CASE(class_names_are_the_directories_or_a_names_file) {
  // Without a file, the class directories in index order; a file names them one line each (CRLF
  // too); TFRecord shards carry no names.
  BOOST_TEST(make_source(folder_table())->describe().class_names == (std::vector<std::string>{"n001", "n002", "n003"}),
             boost::test_tools::per_element());
  const fs::path names = data().root / "names.txt";
  write_file(names, text_bytes("tench, Tinca tinca\r\ngoldfish\nwhite shark\n"));
  const std::string with_file = fmt::format("class_names_file = \"{}\"\n", names.string());
  BOOST_TEST(make_source(folder_table(with_file))->describe().class_names ==
                 (std::vector<std::string>{"tench, Tinca tinca", "goldfish", "white shark"}),
             boost::test_tools::per_element());
  BOOST_TEST(make_source(tf_table(data().root / "tf"))->describe().class_names.empty());

  // A count other than the classes, an empty line, a control character: each names file and line.
  write_file(names, text_bytes("tench\ngoldfish\n"));
  std::string e = error_of([&] { make_source(folder_table(with_file)); });
  BOOST_TEST(contains(e, names.string() + ": 2 names, but the split has 3 classes (num_classes); data.train.class_names_file "
                                   "(test.toml:4) needs one line per class"),
             e);
  write_file(names, text_bytes("tench\n\nwhite shark\n"));
  e = error_of([&] { make_source(folder_table(with_file)); });
  BOOST_TEST(contains(e, names.string() + ":2: empty line"), e);
  const std::string missing = fmt::format("class_names_file = \"{}\"\n", (data().root / "no-names.txt").string());
  e = error_of([&] { make_source(folder_table(missing)); });
  BOOST_TEST(contains(e, "no-names.txt: cannot open: No such file or directory; set by data.train.class_names_file "
                         "(test.toml:4)"),
             e);
  write_file(names, text_bytes("tench\ngold\tfish\nwhite shark\n"));
  e = error_of([&] { make_source(folder_table(with_file)); });
  BOOST_TEST(contains(e, names.string() + ":2: control character 0x09 in a class name"), e);
  write_file(names, text_bytes("tench\ngoldfish\ngrand caf\xe9\n"));  // Latin-1
  e = error_of([&] { make_source(folder_table(with_file)); });
  BOOST_TEST(contains(e, names.string() + ":3: a class name that is not UTF-8 (data.train.class_names_file (test.toml:4)); "
                                          "convert the file, e.g. with iconv -f latin1 -t utf8"),
             e);
}

BOOST_AUTO_TEST_CASE(folder_decodes_rgb_gray_and_cmyk_colours) {
  auto source = make_source(folder_table("size = 32\n"));
  std::int32_t label = -1;
  check_solid(read_sample(*source, 0, 1, label), 32, kGreen);
  check_solid(read_sample(*source, 1, 2, label), 32, kBlue);  // CMYK
  check_solid(read_sample(*source, 2, 3, label), 32, kRed);
  check_solid(read_sample(*source, 3, 4, label), 32, Rgb{128, 128, 128});  // grayscale
}

BOOST_AUTO_TEST_CASE(png_disguised_as_jpeg_is_rejected_by_name) {
  auto source = make_source(folder_table());
  std::int32_t label = -1;
  const std::string e = error_of([&] { read_sample(*source, 5, 1, label); });
  BOOST_TEST(contains(e, "n003/x.JPEG is a PNG file, not a JPEG; convert it"), e);
}

BOOST_AUTO_TEST_CASE(truncated_jpeg_is_a_data_error) {
  auto source = make_source(folder_table());
  std::int32_t label = -1;
  const std::string e = error_of([&] { read_sample(*source, 6, 1, label); });
  BOOST_TEST(contains(e, "y_truncated.JPEG: corrupt or truncated JPEG data"), e);
}

BOOST_AUTO_TEST_CASE(skip_replaces_bad_samples_by_the_next_good_one) {
  auto source = make_source(folder_table("on_error = \"skip\"\n"));
  std::int32_t label = -1;
  // 5 (PNG) and 6 (truncated) are bad; the next good index wraps to 0 (green, class 0).
  const auto pixels = read_sample(*source, 5, 1, label);
  BOOST_TEST(label == 0);
  std::int32_t label0 = -1;
  BOOST_TEST(pixels == read_sample(*source, 0, 1, label0));
  // Both bad files were skipped once; the count reaches metrics.jsonl through counters().
  BOOST_TEST(source->counters().at("skipped_samples") == 2.0);
}

BOOST_AUTO_TEST_CASE(oversized_dimensions_are_rejected_before_decoding) {
  auto source = make_source(folder_table("max_pixels = 1000\n"));
  std::int32_t label = -1;
  const std::string e = error_of([&] { read_sample(*source, 2, 1, label); });
  BOOST_TEST(contains(e, "a_red.JPEG: image is 64 x 48 = 3072 pixels, over max_pixels = 1000"), e);
}

BOOST_AUTO_TEST_CASE(determinism_by_seed) {
  auto source = make_source(folder_table());
  std::int32_t label = -1;
  const auto a = read_sample(*source, 4, 1234, label);
  const auto b = read_sample(*source, 4, 1234, label);
  const auto c = read_sample(*source, 4, 1235, label);
  BOOST_TEST(a == b);
  BOOST_TEST(a != c);
  // A second instance (another worker/process) gives the same tensor for the same seed.
  auto other = make_source(folder_table());
  BOOST_TEST(read_sample(*other, 4, 1234, label) == a);
}

BOOST_AUTO_TEST_CASE(eval_transform_takes_the_centre_crop) {
  auto source = make_source(folder_table("split = \"val\"\n"));
  BOOST_TEST(contains(source->describe().description, "eval transform"));
  std::int32_t label = -1;
  // Only blue survives Resize(256) + CenterCrop(224); a red pixel would mean wrong geometry.
  check_solid(read_sample(*source, 0, 99, label), 224, kBlue);
  // resize = 320: 400 x 320, crop left 88, top 48 -> source x [70.4, 249.6), y [38.4, 217.6),
  // inside the blue frame as well.
  auto scaled = make_source(folder_table("split = \"val\"\nresize = 320\n"));
  check_solid(read_sample(*scaled, 0, 99, label), 224, kBlue);
  // Train transform on the same image sees the red border for some seeds.
  auto train = make_source(folder_table("split = \"val\"\ntransform = \"train\"\n"));
  bool saw_red = false;
  for (std::uint64_t seed = 0; seed < 20 && !saw_red; ++seed) {
    const auto px = read_sample(*train, 0, seed, label);
    for (std::size_t i = 0; i < 224 * 224 && !saw_red; ++i) {
      saw_red = std::abs(px[i] - normalised(kRed[0], 0)) < kTolerance;
    }
  }
  BOOST_TEST(saw_red);
}

BOOST_AUTO_TEST_CASE(sample_ids_are_paths_under_the_root_or_shard_and_record) {
  auto folder = make_source(folder_table());
  BOOST_TEST(folder->sample_id(0) == "train/n001/a_green.JPEG");
  BOOST_TEST(folder->sample_id(4) == "train/n002/c_gradient.JPEG");
  BOOST_TEST(folder->describe().labeled);
  auto tf = make_source(tf_table(data().root / "tf"));
  BOOST_TEST(tf->sample_id(0) == "train-00000-of-00002:0");
  BOOST_TEST(tf->sample_id(3) == "train-00001-of-00002:1");
  const std::string e = error_of([&] { (void)tf->sample_id(4); });
  BOOST_TEST(contains(e, "sample index 4 is out of range [0, 4)"), e);
}

BOOST_AUTO_TEST_CASE(files_layout_lists_every_image_below_the_root_without_labels) {
  // Any depth, sorted by the path under the root, non-images left out; the eval transform even
  // though split is "train" (auto); no classes, so num_classes and class_names_file are refused.
  const fs::path root = data().root / "unlabeled";
  write_file(root / "b.jpg", solid_jpeg(64, 48, kRed));
  write_file(root / "a" / "z.JPEG", solid_jpeg(40, 40, kGreen));
  write_file(root / "a" / "deeper" / "x.png.txt", Bytes{'x'});
  write_file(root / "a" / "deeper" / "y.jpeg", solid_jpeg(50, 60, kBlue));
  auto source = make_source(fmt::format("root = \"{}\"\nlayout = \"files\"\nsize = 32\nresize = 32\n", root.string()));
  const auto info = source->describe();
  BOOST_TEST(!info.labeled);
  BOOST_TEST(info.count == 3);
  BOOST_TEST(info.num_classes == 0);
  BOOST_TEST(info.class_names.empty());
  BOOST_TEST(contains(info.description, "eval transform"), info.description);
  BOOST_TEST(source->sample_id(0) == "a/deeper/y.jpeg");
  BOOST_TEST(source->sample_id(1) == "a/z.JPEG");
  BOOST_TEST(source->sample_id(2) == "b.jpg");
  std::int32_t label = -1;
  check_solid(read_sample(*source, 2, 5, label), 32, kRed);
  BOOST_TEST(label == 0);
  check_solid(read_sample(*source, 0, 5, label), 32, kBlue);

  std::string e = error_of([&] {
    make_source(fmt::format("root = \"{}\"\nlayout = \"files\"\nnum_classes = 10\n", root.string()));
  });
  BOOST_TEST(contains(e, "data.train.num_classes (test.toml:5) = 10: layout = \"files\" reads images without labels"), e);
  // One image file is a list of one, named by its file name.
  auto one = make_source(fmt::format("root = \"{}\"\nlayout = \"files\"\nsize = 32\nresize = 32\n",
                                     (root / "b.jpg").string()));
  BOOST_TEST(one->describe().count == 1);
  BOOST_TEST(one->sample_id(0) == "b.jpg");
  check_solid(read_sample(*one, 0, 5, label), 32, kRed);
  e = error_of([&] {
    make_source(fmt::format("root = \"{}\"\nlayout = \"files\"\n", (root / "a" / "deeper" / "x.png.txt").string()));
  });
  BOOST_TEST(contains(e, "is neither a directory nor a .JPEG/.jpg/.png file"), e);
  const fs::path empty = data().root / "no-images";
  write_file(empty / "readme.txt", Bytes{'x'});
  e = error_of([&] { make_source(fmt::format("root = \"{}\"\nlayout = \"files\"\n", empty.string())); });
  BOOST_TEST(contains(e, empty.string() + ": no .JPEG/.jpg/.png files in it or its subdirectories"), e);
}

BOOST_AUTO_TEST_CASE(tfrecord_labels_pixels_and_layout_detection) {
  auto source = make_source(tf_table(data().root / "tf", "size = 32\n"));
  const auto info = source->describe();
  BOOST_TEST(info.count == 4);
  BOOST_TEST(info.num_classes == 1000);
  BOOST_TEST(contains(info.description, "2 shards"));
  std::int32_t label = -1;
  check_solid(read_sample(*source, 0, 5, label), 32, kRed);
  BOOST_TEST(label == 1);
  check_solid(read_sample(*source, 1, 5, label), 32, kGreen);
  BOOST_TEST(label == 0);
  read_sample(*source, 2, 5, label);
  BOOST_TEST(label == 2);
  const std::string e = error_of([&] { read_sample(*source, 3, 5, label); });
  BOOST_TEST(contains(e, "train-00001-of-00002 (record 1 at offset"), e);
  BOOST_TEST(contains(e, "the Example has no image/encoded bytes"), e);
}

BOOST_AUTO_TEST_CASE(tfrecord_label_offset_and_range) {
  auto source = make_source(tf_table(data().root / "tf", "label_offset = 0\nnum_classes = 3\n"));
  std::int32_t label = -1;
  read_sample(*source, 0, 5, label);
  BOOST_TEST(label == 2);
  const std::string e = error_of([&] { read_sample(*source, 2, 5, label); });
  BOOST_TEST(contains(e, "label 3 + label_offset 0 = 3 is outside [0, 3)"), e);
}

BOOST_AUTO_TEST_CASE(tfrecord_data_crc_corruption_is_detected_at_read) {
  const fs::path dir = data().root / "tf-data-crc";
  fs::create_directories(dir);
  Bytes shard0 = read_file(data().root / "tf" / "train-00000-of-00002");
  const Bytes shard1 = read_file(data().root / "tf" / "train-00001-of-00002");
  // Flip a byte inside record 1's data (after record 0 and record 1's 12-byte header).
  const std::size_t first = shard0.size() - (make_example(solid_jpeg(50, 70, kGreen), 1).size() + 16);
  shard0[first + 12 + 30] ^= 0x40;
  write_file(dir / "train-00000-of-00002", shard0);
  write_file(dir / "train-00001-of-00002", shard1);
  auto source = make_source(tf_table(dir));
  std::int32_t label = -1;
  read_sample(*source, 0, 1, label);  // record 0 is intact
  const std::string e = error_of([&] { read_sample(*source, 1, 1, label); });
  BOOST_TEST(contains(e, fmt::format("train-00000-of-00002 (record 1 at offset {}): data CRC mismatch", first)), e);
}

BOOST_AUTO_TEST_CASE(tfrecord_length_crc_corruption_is_detected_at_open) {
  const fs::path dir = data().root / "tf-length-crc";
  Bytes shard0 = read_file(data().root / "tf" / "train-00000-of-00002");
  shard0[1] ^= 0x01;  // record 0's length
  write_file(dir / "train-00000-of-00002", shard0);
  write_file(dir / "train-00001-of-00002", read_file(data().root / "tf" / "train-00001-of-00002"));
  const std::string e = error_of([&] { make_source(tf_table(dir)); });
  BOOST_TEST(contains(e, "train-00000-of-00002 (record 0 at offset 0): length CRC mismatch"), e);
}

BOOST_AUTO_TEST_CASE(tfrecord_truncation_missing_shard_and_record_limit) {
  const fs::path dir = data().root / "tf-truncated";
  Bytes shard1 = read_file(data().root / "tf" / "train-00001-of-00002");
  shard1.resize(shard1.size() - 5);
  write_file(dir / "train-00001-of-00002", shard1);
  std::string e = error_of([&] { make_source(tf_table(dir)); });
  BOOST_TEST(contains(e, "shard train-00000-of-00002 is missing (1 of 2 present)"), e);

  write_file(dir / "train-00000-of-00002", read_file(data().root / "tf" / "train-00000-of-00002"));
  e = error_of([&] { make_source(tf_table(dir)); });
  BOOST_TEST(contains(e, "train-00001-of-00002 (record 1 at offset"), e);
  BOOST_TEST(contains(e, "truncated record"), e);

  e = error_of([&] { make_source(tf_table(data().root / "tf", "max_record_bytes = 100\n")); });
  BOOST_TEST(contains(e, "train-00000-of-00002 (record 0 at offset 0): record of"), e);
  BOOST_TEST(contains(e, "over max_record_bytes = 100"), e);
}

BOOST_AUTO_TEST_CASE(parameter_and_root_errors_name_the_key) {
  std::string e = error_of([&] { make_source(folder_table("mean = [0.5, 0.5]\n")); });
  BOOST_TEST(contains(e, "data.train.mean"), e);
  BOOST_TEST(contains(e, "has 2 values"), e);
  e = error_of([&] { make_source(tf_table(data().root / "nowhere")); });
  BOOST_TEST(contains(e, "is not a directory"), e);
  e = error_of([&] { make_source(tf_table(data().root / "folder", "split = \"val\"\nlayout = \"tfrecord\"\n")); });
  BOOST_TEST(contains(e, "no TFRecord shards named validation-NNNNN-of-MMMMM"), e);
}

BOOST_AUTO_TEST_CASE(eval_geometry_holds_with_dct_downscaling) {
  // gradient_jpeg: R = x * 255 / (w - 1), G = y * 255 / (h - 1). Resize(256) of 1600 x 1200 is
  // 341 x 256; CenterCrop(224) starts at left = round(58.5) = 58 (half to even), top = 16.
  auto source = make_source(folder_table("split = \"val\"\n"));
  std::int32_t label = -1;
  const auto px = read_sample(*source, 1, 0, label);
  BOOST_TEST(label == 1);
  const double sx = 1600.0 / 341.0, sy = 1200.0 / 256.0;
  float worst = 0;
  for (int o = 0; o < 224; o += 7) {
    const double u = (58 + o + 0.5) * sx - 0.5;   // source pixel coordinate of output column o
    const double v = (16 + o + 0.5) * sy - 0.5;   // and of output row o
    const auto r = static_cast<float>(u * 255.0 / 1599.0);
    const auto g = static_cast<float>(v * 255.0 / 1199.0);
    const float got_r = px[static_cast<std::size_t>(100 * 224 + o)] * 0.229f + 0.485f;
    const float got_g = px[static_cast<std::size_t>(224 * 224 + o * 224 + 100)] * 0.224f + 0.456f;
    worst = std::max({worst, std::abs(got_r * 255.0f - r), std::abs(got_g * 255.0f - g)});
  }
  BOOST_TEST(worst < 3.0f, "worst deviation " << worst << " grey levels");
}
