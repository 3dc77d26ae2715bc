// MnistSource: finds a split's image and label files, validates them together, serves samples.
//
// Decisions: a split's files may use either naming convention seen in the wild
// (`train-images-idx3-ubyte`, the original, and `train-images.idx3-ubyte`, as some mirrors
// unpack it), raw or gzipped; the first candidate that exists wins and the error for none
// lists every path tried. Labels are range-checked for the whole file up front so a bad label
// fails at start-up, not in the middle of an epoch.
#include "mnist_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "idx_reader.hpp"
#include "kiln/errors.hpp"

namespace kiln::mnist {
namespace {

namespace fs = std::filesystem;

// "train" + "images" + 3 -> the existing file among the four accepted names.
std::string find_split_file(const fs::path& dir, const std::string& prefix, const char* kind,
                            int ndims, const std::string& where) {
  const std::string dashed = fmt::format("{}-{}-idx{}-ubyte", prefix, kind, ndims);
  const std::string dotted = fmt::format("{}-{}.idx{}-ubyte", prefix, kind, ndims);
  const std::string candidates[] = {dashed, dashed + ".gz", dotted, dotted + ".gz"};
  for (const std::string& name : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(dir / name, ec)) return (dir / name).string();
  }
  throw DataError(fmt::format(
      "{}: no {} {} file; tried {}, {}, {} and {}; set {} to the folder that holds the MNIST "
      "IDX files",
      dir.string(), prefix == "t10k" ? "test" : "train", kind, candidates[0], candidates[1],
      candidates[2], candidates[3], where));
}

std::string dataset_name(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("fashion") != std::string::npos ? "Fashion-MNIST" : "MNIST";
}

}  // namespace

MnistSource::MnistSource(const PluginArgs& args) {
  if (!args.params) throw ConfigError("mnist: created without a parameter table");
  const ParamMap& p = *args.params;
  const std::string& path = p.get_string("path");
  split_ = p.get_string("split");
  const double mean = p.get_float("mean");
  const double stddev = p.get_float("std");
  const bool flatten = p.get_bool("flatten");
  const std::int64_t limit = p.get_int("limit");
  const std::int64_t num_classes = p.get_int("num_classes");
  const auto& class_names = p.get<std::vector<std::string>>("class_names");

  if (split_ != "train" && split_ != "test") {
    throw ConfigError(fmt::format("{} = \"{}\": use \"train\" or \"test\"", p.where("split"), split_));
  }
  if (!class_names.empty() && static_cast<std::int64_t>(class_names.size()) != num_classes) {
    // A shorter list would leave the last labels unnamed, a longer one name labels that cannot occur.
    throw ConfigError(fmt::format("{} has {} names for num_classes = {}; give one per class, label 0 first",
                                  p.where("class_names"), class_names.size(), num_classes));
  }
  // mean, std, limit and num_classes: the schema's ranges (plugin.cpp) were checked by the core.
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    throw DataError(fmt::format("{}: \"{}\" is not a directory; point it at the folder with the "
                                "MNIST IDX files (Debian: apt install fashion-mnist)",
                                p.where("path"), path));
  }

  const std::string prefix = split_ == "train" ? "train" : "t10k";
  images_file_ = find_split_file(path, prefix, "images", 3, p.where("path"));
  labels_file_ = find_split_file(path, prefix, "labels", 1, p.where("path"));

  IdxArray images = read_idx_u8(images_file_, 3, "pixels");
  if (images.dims[1] != kImageSide || images.dims[2] != kImageSide) {
    throw DataError(fmt::format("{}: images are {} x {}, but MNIST images are {} x {}", images_file_,
                                images.dims[1], images.dims[2], kImageSide, kImageSide));
  }
  IdxArray labels = read_idx_u8(labels_file_, 1, "labels");
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(fmt::format(
        "{} has {} images but {} has {} labels; both files must come from the same split",
        images_file_, images.dims[0], labels_file_, labels.dims[0]));
  }
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= num_classes) {
      throw DataError(fmt::format(
          "{}: label {} of sample {} is out of range for num_classes = {} ({}); raise num_classes "
          "or fix the file",
          labels_file_, labels.data[i], i, num_classes, p.where("num_classes")));
    }
  }

  const std::int64_t available = images.dims[0];
  const std::int64_t count = limit > 0 ? std::min(limit, available) : available;
  pixels_ = std::move(images.data);
  pixels_.resize(static_cast<std::size_t>(count * kImagePixels));
  pixels_.shrink_to_fit();
  labels_.assign(labels.data.begin(), labels.data.begin() + count);

  for (int v = 0; v < 256; ++v) {
    normalised_[static_cast<std::size_t>(v)] =
        static_cast<float>((static_cast<double>(v) / 255.0 - mean) / stddev);
  }

  info_.sample_shape = flatten ? Shape{kImagePixels} : Shape{1, kImageSide, kImageSide};
  info_.sample_dtype = DType::f32;
  info_.num_classes = num_classes;
  info_.class_names = class_names;
  info_.count = count;
  info_.description = fmt::format("{} {}: {} samples from {}{}", dataset_name(path), split_, count,
                                  path, count < available ? fmt::format(" (limit {} of {})", limit, available) : "");
}

void MnistSource::read(std::int64_t index, std::uint64_t /*seed: no augmentation*/,
                       const SampleSlot& out) const {
  if (index < 0 || index >= info_.count) {
    throw DataError(fmt::format("{}: sample index {} is out of range [0, {})", images_file_, index,
                                info_.count));
  }
  constexpr std::size_t kBytes = static_cast<std::size_t>(kImagePixels) * sizeof(float);
  if (out.data == nullptr || out.label == nullptr || out.bytes != kBytes) {
    throw DataError(fmt::format(
        "mnist: sample {} asked into a slot of {} bytes{}; it needs {} bytes (784 f32) and a label",
        index, out.bytes, out.label ? "" : " without a label", kBytes));
  }
  const std::uint8_t* src = pixels_.data() + index * kImagePixels;
  auto* dst = static_cast<float*>(out.data);
  for (std::int64_t i = 0; i < kImagePixels; ++i) dst[i] = normalised_[src[i]];
  *out.label = labels_[static_cast<std::size_t>(index)];
}

}  // namespace kiln::mnist
