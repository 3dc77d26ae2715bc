// FolderIndex: the file list of an ImageFolder split, <root>/<split>/<wnid>/<image>, built once.
//
// Class index = position of the wnid directory in the byte-wise sorted list of directories
// (torchvision's ImageFolder rule), so it matches the 1-based TFRecord label minus one.
// Files with any case of .jpeg/.jpg/.png are listed, sorted within each class; file names are
// kept in one string blob (1.28M paths cost ~40 MB instead of ~100 MB as std::strings).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::imagenet {

class FolderIndex {
 public:
  /// Lists `dir` (= <root>/<split>). Throws DataError if it holds no class directory or no image.
  explicit FolderIndex(const std::filesystem::path& dir);

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(files_.size()); }
  std::int64_t num_classes() const noexcept { return static_cast<std::int64_t>(classes_.size()); }
  const std::vector<std::string>& classes() const noexcept { return classes_; }
  /// Full path of file `i`.
  std::string path(std::int64_t i) const;
  /// File `i`'s path under the split directory ("n01440764/n01440764_10026.JPEG").
  std::string relative(std::int64_t i) const;
  std::int32_t label(std::int64_t i) const noexcept {
    return files_[static_cast<std::size_t>(i)].label;
  }

 private:
  struct Entry {
    std::uint64_t name_offset;  // into names_
    std::uint32_t name_size;
    std::int32_t label;
  };
  std::filesystem::path dir_;
  std::vector<std::string> classes_;
  std::string names_;  // "<wnid>/<file>" back to back
  std::vector<Entry> files_;
};

}  // namespace kiln::imagenet
