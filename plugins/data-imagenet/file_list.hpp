// FileList: every image file under a directory, at any depth, or one image file, for layout =
// "files": images without labels, to predict on (Keras' image_dataset_from_directory(labels=None)).
// Paths are kept relative to the directory and sorted byte-wise, so a sample's index does not
// depend on the order the file system lists them in.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::imagenet {

class FileList {
 public:
  /// Lists `dir` and its subdirectories (symbolic links to directories are not followed); a
  /// `dir` that is an image file is a list of that one file, named by its file name. Throws
  /// DataError if it cannot be listed or holds no .JPEG/.jpg/.png file.
  explicit FileList(const std::filesystem::path& dir);

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(relative_.size()); }
  /// Full path of file `i`.
  std::string path(std::int64_t i) const { return (dir_ / relative(i)).string(); }
  /// File `i`'s path under the directory ("cats/01.jpg").
  const std::string& relative(std::int64_t i) const { return relative_[static_cast<std::size_t>(i)]; }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> relative_;
};

}  // namespace kiln::imagenet
