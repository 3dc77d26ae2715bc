// TempDir: a fresh, empty directory under the system temp dir for one test, removed at scope exit
// (whatever the test left in it). Each has its own name (pid and a counter), so test cases and
// test processes running at once never share one.
//
// Header-only, for any test area: #include "../support/temp_dir.hpp".
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace kiln::test {

struct TempDir {
  std::filesystem::path path;
  /// `tag` names the area in the folder's name: kiln-test-<tag>-<pid>-<n>.
  explicit TempDir(const std::string& tag = "test") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() / fmt::format("kiln-test-{}-{}-{}", tag, ::getpid(), counter++);
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace kiln::test
