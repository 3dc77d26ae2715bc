// Listing the images of layout = "files" (see file_list.hpp).
#include "file_list.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "file_util.hpp"
#include "kiln/errors.hpp"

namespace kiln::imagenet {

namespace fs = std::filesystem;

FileList::FileList(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir, ec) && is_image_name(dir.filename().string())) {
    dir_ = dir.parent_path();
    relative_.push_back(dir.filename().string());
    return;
  }
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (is_image_name(it->path().filename().string()) && it->is_regular_file(type_ec)) {
      relative_.push_back(it->path().lexically_relative(dir).generic_string());
    }
  }
  if (ec) throw DataError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  if (relative_.empty()) {
    throw DataError(fmt::format("{}: no .JPEG/.jpg/.png files in it or its subdirectories", dir.string()));
  }
  std::sort(relative_.begin(), relative_.end());
}

}  // namespace kiln::imagenet
