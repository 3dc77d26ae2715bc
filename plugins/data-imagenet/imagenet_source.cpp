// ImagenetSource: parameter checks, layout detection and the per-sample pipeline
//   bytes (file or record) -> header + limits -> crop plan -> DCT-scaled decode -> resample.
#include "imagenet_source.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <span>

#include "class_names_file.hpp"
#include "example_proto.hpp"
#include "file_util.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "sample_decode.hpp"

namespace kiln::imagenet {
namespace {

namespace fs = std::filesystem;

// Consecutive bad samples tolerated under on_error = "skip" before giving up: a wrong root or a
// wholly corrupt shard should still stop the run.
constexpr std::int64_t kMaxConsecutiveSkips = 64;

std::array<float, 3> three_floats(const ParamMap& p, const char* key, bool positive) {
  const auto& v = p.get<std::vector<double>>(key);
  if (v.size() != 3) {
    throw ConfigError(fmt::format("{} has {} values; give one per RGB channel (3)", p.where(key), v.size()));
  }
  std::array<float, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) {
    if (!std::isfinite(v[i]) || (positive && !(v[i] > 0))) {
      throw ConfigError(fmt::format("{}: value {} must be a finite number{}", p.where(key), v[i],
                                    positive ? " > 0 (it divides every pixel)" : ""));
    }
    out[i] = static_cast<float>(v[i]);
  }
  return out;
}

}  // namespace

ImagenetSource::ImagenetSource(const PluginArgs& args) {
  if (!args.params) throw ConfigError("imagenet: created without a parameter table");
  const ParamMap& p = *args.params;
  const fs::path root = p.get_string("root");
  const std::string& split = p.get_string("split");
  const std::string& layout = p.get_string("layout");
  const std::string& transform = p.get_string("transform");
  if (split != "train" && split != "val") {
    throw ConfigError(fmt::format("{} = \"{}\": use \"train\" or \"val\"", p.where("split"), split));
  }

  split_ = split;
  // Unlabeled images are only predicted on: "auto" means the eval transform whatever the split.
  transform_.kind = transform == "train"                   ? TransformKind::train
                    : transform == "eval"                  ? TransformKind::eval
                    : split == "train" && layout != "files" ? TransformKind::train
                                                            : TransformKind::eval;
  const std::int64_t size = p.get_int("size"), resize = p.get_int("resize");
  if (size < 8 || size > 4096) {
    throw ConfigError(fmt::format("{} = {} must be in 8..4096", p.where("size"), size));
  }
  if (resize < size || resize > 8192) {
    throw ConfigError(fmt::format("{} = {} must be in size ({})..8192: eval resizes the shorter "
                                  "side to `resize`, then centre-crops `size`",
                                  p.where("resize"), resize, size));
  }
  transform_.size = static_cast<int>(size);
  transform_.resize = static_cast<int>(resize);
  transform_.scale_min = p.get_float("scale_min");
  transform_.scale_max = p.get_float("scale_max");
  if (!(transform_.scale_min > 0 && transform_.scale_min <= transform_.scale_max &&
        transform_.scale_max <= 1.0)) {
    throw ConfigError(fmt::format("{} = {} and {} = {} must satisfy 0 < scale_min <= scale_max <= 1",
                                  p.where("scale_min"), transform_.scale_min, p.where("scale_max"),
                                  transform_.scale_max));
  }
  transform_.ratio_min = p.get_float("ratio_min");
  transform_.ratio_max = p.get_float("ratio_max");
  if (!(transform_.ratio_min > 0 && transform_.ratio_min <= transform_.ratio_max &&
        std::isfinite(transform_.ratio_max))) {
    throw ConfigError(fmt::format("{} = {} and {} = {} must satisfy 0 < ratio_min <= ratio_max",
                                  p.where("ratio_min"), transform_.ratio_min, p.where("ratio_max"),
                                  transform_.ratio_max));
  }
  transform_.flip = p.get_bool("flip");
  decode_scaled_ = p.get_bool("decode_scaled");
  const std::string& output = p.get_string("output");
  if (output == "f32") {
    transform_.format = SampleFormat::f32_chw;
  } else if (output == "u8") {
    transform_.format = SampleFormat::u8_hwc;
  } else {
    throw ConfigError(fmt::format("{} = \"{}\" is not a sample type; use \"f32\" (normalised (3, size, size)) "
                                  "or \"u8\" (raw (size, size, 3) bytes, normalised by the model)",
                                  p.where("output"), output));
  }
  transform_.mean = three_floats(p, "mean", false);
  transform_.std = three_floats(p, "std", true);

  max_pixels_ = p.get_int("max_pixels");
  if (max_pixels_ < 1) {
    throw ConfigError(fmt::format("{} = {} must be >= 1", p.where("max_pixels"), max_pixels_));
  }
  const std::int64_t max_record = p.get_int("max_record_bytes");
  if (max_record < 1 || max_record > (std::int64_t{1} << 32) - 1) {
    throw ConfigError(fmt::format("{} = {} must be in 1..4294967295", p.where("max_record_bytes"), max_record));
  }
  max_record_bytes_ = static_cast<std::uint64_t>(max_record);
  label_offset_ = p.get_int("label_offset");
  on_error_ = p.get_string("on_error") == "skip" ? OnError::skip : OnError::fail;
  std::int64_t num_classes = p.get_int("num_classes");
  if (num_classes < 0) {
    throw ConfigError(fmt::format("{} = {} must be >= 0 (0: from the data)", p.where("num_classes"), num_classes));
  }

  std::error_code ec;
  if (layout == "files") {
    // A folder of images, or one image: `kiln predict` on a single photo.
    if (!fs::is_directory(root, ec) && !(fs::is_regular_file(root, ec) && is_image_name(root.filename().string()))) {
      throw DataError(fmt::format("{}: \"{}\" is neither a directory nor a .JPEG/.jpg/.png file", p.where("root"),
                                  root.string()));
    }
  } else if (!fs::is_directory(root, ec)) {
    throw DataError(fmt::format("{}: \"{}\" is not a directory; point it at the ImageNet root "
                                "(holding {}/<wnid>/*.JPEG or {} shards)",
                                p.where("root"), root.string(), split, TfRecordIndex::pattern(split)));
  }
  const fs::path folder_dir = root / split;
  if (layout == "files") {
    layout_ = Layout::files;
  } else if (layout == "folder") {
    layout_ = Layout::folder;
  } else if (layout == "tfrecord") {
    layout_ = Layout::tfrecord;
  } else if (fs::is_directory(folder_dir, ec)) {
    layout_ = Layout::folder;
  } else if (TfRecordIndex::present(root, split)) {
    layout_ = Layout::tfrecord;
  } else {
    throw DataError(fmt::format("{}: found neither an ImageFolder split {} nor TFRecord shards {}; "
                                "check {}",
                                root.string(), folder_dir.string(), TfRecordIndex::pattern(split),
                                p.where("root")));
  }

  std::int64_t count = 0;
  std::string source;
  if (layout_ == Layout::files) {
    // Images without labels: nothing about classes can come from the data.
    if (num_classes != 0) {
      throw ConfigError(fmt::format("{} = {}: layout = \"files\" reads images without labels, so it has no classes "
                                    "(the model's checkpoint names them); leave num_classes at 0",
                                    p.where("num_classes"), num_classes));
    }
    if (!p.get_string("class_names_file").empty()) {
      throw ConfigError(fmt::format("{}: layout = \"files\" reads images without labels, so it has no classes "
                                    "(the model's checkpoint names them); leave class_names_file empty",
                                    p.where("class_names_file")));
    }
    files_ = std::make_unique<FileList>(root);
    count = files_->size();
    source = fmt::format("unlabeled, under {}", root.string());
  } else if (layout_ == Layout::folder) {
    folder_ = std::make_unique<FolderIndex>(folder_dir);
    count = folder_->size();
    if (num_classes == 0) {
      num_classes = folder_->num_classes();
    } else if (num_classes < folder_->num_classes()) {
      throw DataError(fmt::format("{} has {} class directories but {} = {}; raise num_classes or "
                                  "set it to 0 (from the data)",
                                  folder_dir.string(), folder_->num_classes(), p.where("num_classes"),
                                  num_classes));
    }
    source = fmt::format("{} classes in {}", folder_->num_classes(), folder_dir.string());
  } else {
    records_ = std::make_unique<TfRecordIndex>(root, split, max_record_bytes_);
    count = records_->size();
    // Labels are only known by reading every record; build_imagenet_data.py's 1..1000 (0
    // unused) with label_offset -1 gives 1000 classes, with offset 0 (1001-class models) 1001.
    if (num_classes == 0) num_classes = 1001 + label_offset_;
    if (num_classes < 1) {
      throw ConfigError(fmt::format("{} = {} leaves no classes; set num_classes explicitly",
                                    p.where("label_offset"), label_offset_));
    }
    source = fmt::format("{} shards {} in {}", records_->num_shards(), TfRecordIndex::pattern(split),
                         root.string());
  }
  if (count == 0) throw DataError(fmt::format("{}: the {} split is empty", root.string(), split));

  const bool bytes = transform_.format == SampleFormat::u8_hwc;
  info_.sample_shape = bytes ? Shape{size, size, 3} : Shape{3, size, size};
  info_.sample_dtype = bytes ? DType::u8 : DType::f32;
  info_.num_classes = num_classes;
  info_.count = count;
  info_.labeled = layout_ != Layout::files;
  // Names for `kiln predict` and for the core's check that both splits number classes alike.
  const std::string& names_file = p.get_string("class_names_file");
  if (!names_file.empty()) {
    info_.class_names = read_class_names_file(names_file, p.where("class_names_file"), num_classes);
  } else if (folder_) {
    info_.class_names = folder_->classes();
  }
  info_.description = fmt::format("ImageNet {} ({} transform, {}x{} {}): {} images, {}",
                                  layout_ == Layout::files ? "images" : split,
                                  transform_.kind == TransformKind::train ? "train" : "eval", size,
                                  size, bytes ? "u8" : "f32", count, source);
}

std::string ImagenetSource::sample_id(std::int64_t index) const {
  if (index < 0 || index >= info_.count) {
    throw DataError(fmt::format("imagenet: sample index {} is out of range [0, {})", index, info_.count));
  }
  switch (layout_) {
    case Layout::folder: return split_ + "/" + folder_->relative(index);
    case Layout::files: return files_->relative(index);
    case Layout::tfrecord: return records_->id(index);
  }
  return {};
}

void ImagenetSource::read(std::int64_t index, std::uint64_t seed, const SampleSlot& out) const {
  if (index < 0 || index >= info_.count) {
    throw DataError(fmt::format("imagenet: sample index {} is out of range [0, {})", index, info_.count));
  }
  const DType dtype = info_.sample_dtype;
  const std::size_t bytes = static_cast<std::size_t>(3) * transform_.size * transform_.size * dtype_size(dtype);
  if (out.data == nullptr || out.label == nullptr || out.bytes != bytes) {
    throw DataError(fmt::format("imagenet: sample {} asked into a slot of {} bytes{}; it needs {} "
                                "bytes ({} {}) and a label",
                                index, out.bytes, out.label ? "" : " without a label", bytes,
                                shape_string(info_.sample_shape), dtype_name(dtype)));
  }
  if (on_error_ == OnError::fail) {
    read_one(index, seed, out.data, out.label);
    return;
  }
  std::int64_t i = index;
  for (std::int64_t attempt = 0;; ++attempt) {
    try {
      read_one(i, seed, out.data, out.label);
      return;
    } catch (const DataError& e) {
      const std::int64_t total = skipped_.fetch_add(1) + 1;
      // Every bad sample is logged once per epoch it is met (they are few in real data); the
      // running total is the count a user compares between runs.
      kiln::log::get("imagenet")->warn("skipped sample {} (on_error = \"skip\", {} skipped so far): {}",
                                       i, total, e.what());
      if (attempt + 1 >= kMaxConsecutiveSkips) {
        throw DataError(fmt::format("imagenet: {} consecutive bad samples from index {} (last: {}); "
                                    "the data is broken beyond skipping, check root",
                                    kMaxConsecutiveSkips, index, e.what()));
      }
      i = (i + 1) % info_.count;
    }
  }
}

void ImagenetSource::read_one(std::int64_t index, std::uint64_t seed, void* pixels,
                              std::int32_t* label) const {
  thread_local std::vector<unsigned char> buffer;
  thread_local std::vector<unsigned char> rgb;
  std::span<const unsigned char> image;
  std::string where;
  if (layout_ != Layout::tfrecord) {  // one image file per sample
    const bool unlabeled = layout_ == Layout::files;
    where = unlabeled ? files_->path(index) : folder_->path(index);
    // Read first, then take data(): read_whole_file may reallocate `buffer`, and in one expression
    // the order is the compiler's (GCC read the file first, clang took data() first and got the
    // old, freed pointer).
    const std::size_t size = read_whole_file(where, max_record_bytes_, buffer);
    image = std::span<const unsigned char>(buffer.data(), size);
    *label = unlabeled ? 0 : folder_->label(index);  // files: no label (DatasetInfo::labeled is false)
  } else {
    where = records_->where(index);
    records_->read_record(index, buffer);
    const ExampleFields fields = parse_example(buffer, where);
    if (!fields.has_image) {
      throw DataError(fmt::format("{}: the Example has no image/encoded bytes", where));
    }
    if (!fields.label) {
      throw DataError(fmt::format("{}: the Example has no image/class/label", where));
    }
    const std::int64_t l = *fields.label + label_offset_;
    if (l < 0 || l >= info_.num_classes) {
      throw DataError(fmt::format("{}: label {} + label_offset {} = {} is outside [0, {}); check "
                                  "label_offset and num_classes",
                                  where, *fields.label, label_offset_, l, info_.num_classes));
    }
    image = fields.image;
    *label = static_cast<std::int32_t>(l);
  }

  decode_sample(image, where, transform_, max_pixels_, decode_scaled_, seed, rgb, pixels);
}

}  // namespace kiln::imagenet
