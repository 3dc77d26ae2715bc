// Shared helpers of the plugin tests: fixture paths, a temporary directory that cleans up, an
// environment variable set for a scope, a
// scanned registry and its single failure, and the message of an expected exception.
#pragma once

#include <stdlib.h>

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/plugin/registry.hpp"

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

/// Sets (or, with nullptr, unsets) an environment variable for a scope and puts back what was
/// there: the suite runs with KILN_NO_USER_PLUGINS=1 (tests/CMakeLists.txt), and a test of the
/// per-user folder must not leave it off for the tests after it.
class ScopedEnvVar {
 public:
  ScopedEnvVar(std::string name, const char* value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) previous_ = old;
    if (value != nullptr) ::setenv(name_.c_str(), value, 1);
    else ::unsetenv(name_.c_str());
  }
  ~ScopedEnvVar() {
    if (previous_) ::setenv(name_.c_str(), previous_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnvVar(const ScopedEnvVar&) = delete;
  ScopedEnvVar& operator=(const ScopedEnvVar&) = delete;

 private:
  std::string name_;
  std::optional<std::string> previous_;
};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// The names of the checks a `kiln plugins test` report marks FAIL, in order.
inline std::vector<std::string> failed_checks(const std::string& report) {
  std::vector<std::string> failed;
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  FAIL  ")) failed.push_back(line.substr(8, line.find(' ', 8) - 8));
  }
  return failed;
}

/// A registry over `dirs`, scanned.
inline kiln::plugin::Registry scanned(std::vector<std::filesystem::path> dirs) {
  kiln::plugin::Registry registry(std::move(dirs));
  registry.scan();
  return registry;
}

/// The reason of the registry's single failure, at `library`; fails the test unless it has
/// exactly that one failure and no plugins.
inline std::string only_failure(const kiln::plugin::Registry& registry, const std::filesystem::path& library) {
  BOOST_REQUIRE_EQUAL(registry.failures().size(), 1u);
  BOOST_TEST(registry.failures()[0].library == library);
  BOOST_TEST(registry.plugins().empty());
  return registry.failures()[0].reason;
}

/// what() of the E that `f` throws; fails the test if it throws nothing or something else.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (...) {
    BOOST_FAIL("an exception of another type was thrown");
  }
  BOOST_FAIL("expected an exception, none was thrown");
  return {};
}

}  // namespace kiln_test
