// Shared helpers of the plugin tests: fixture paths and a temporary directory that cleans up.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace kiln_test {

/// Directory of fixture `name` (tests/plugin/CMakeLists.txt builds one library into each).
inline std::filesystem::path fixture_dir(const std::string& name) {
  return std::filesystem::path(KILN_FIXTURE_ROOT) / name;
}
inline std::filesystem::path fixture_library(const std::string& name) {
  return fixture_dir(name) / ("libkiln-fixture-" + name + ".so");
}

/// A fresh private (0700) directory, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-plugin-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace kiln_test
