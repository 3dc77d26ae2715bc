// ImageFolder listing (see folder_index.hpp). Progress is logged every 100k files because a
// cold listing of ImageNet train takes tens of seconds on network storage.
#include "folder_index.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "file_util.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"

namespace kiln::imagenet {
namespace {

namespace fs = std::filesystem;

}  // namespace

FolderIndex::FolderIndex(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) classes_.push_back(it->path().filename().string());
  }
  if (ec) throw DataError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  std::sort(classes_.begin(), classes_.end());
  if (classes_.empty()) {
    throw DataError(fmt::format("{}: no class directories; an ImageFolder split holds one "
                                "directory per class (<wnid>/*.JPEG)",
                                dir.string()));
  }

  auto log = kiln::log::get("imagenet");
  std::vector<std::string> names;
  std::size_t next_report = 100000;
  for (std::size_t c = 0; c < classes_.size(); ++c) {
    names.clear();
    const fs::path class_dir = dir / classes_[c];
    for (fs::directory_iterator it(class_dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      std::error_code type_ec;
      if (is_image_name(name) && it->is_regular_file(type_ec)) names.push_back(std::move(name));
    }
    if (ec) throw DataError(fmt::format("{}: cannot list: {}", class_dir.string(), ec.message()));
    if (names.empty()) log->warn("{}: class {} ({}) has no images", class_dir.string(), c, classes_[c]);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string rel = classes_[c] + "/" + name;
      files_.push_back(Entry{names_.size(), static_cast<std::uint32_t>(rel.size()),
                             static_cast<std::int32_t>(c)});
      names_ += rel;
    }
    if (files_.size() >= next_report) {
      log->info("{}: listed {} images in {} of {} classes", dir.string(), files_.size(), c + 1,
                classes_.size());
      next_report = files_.size() + 100000;
    }
  }
  if (files_.empty()) {
    throw DataError(fmt::format("{}: {} class directories but no .JPEG/.jpg/.png files in them",
                                dir.string(), classes_.size()));
  }
}

std::string FolderIndex::path(std::int64_t i) const { return (dir_ / relative(i)).string(); }

std::string FolderIndex::relative(std::int64_t i) const {
  const Entry& e = files_[static_cast<std::size_t>(i)];
  return names_.substr(e.name_offset, e.name_size);
}

}  // namespace kiln::imagenet
