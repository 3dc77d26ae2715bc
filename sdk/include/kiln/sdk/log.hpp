// Logging for plugins and the core: one named logger per subsystem ("train", "loader", "gloo",
// "imagenet"), rank-prefixed, written through the host's sinks.
//
//   auto log = kiln::log::get("my-plugin");
//   log->info("read {} samples from {}", n, path);
//
// Rank 0 prints info and above on the console; other ranks print warnings and errors only (so
// logs are not duplicated W times, yet no rank's failure is hidden). Every rank also writes all
// levels to <run_dir>/logs/rank<N>.log. The sinks live in libkiln_sdk, so a plugin's lines carry
// the same prefix and land in the same file as the core's. This header is a facade: spdlog is an
// implementation detail of libkiln_sdk, and plugin authors need only fmt's headers.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::log {

enum class Level : int { trace = 0, debug = 1, info = 2, warn = 3, error = 4, off = 6 };

/// A subsystem's logger. Thread-safe; cheap to copy (shares its sink-side state).
class Logger {
 public:
  struct Impl;
  explicit Logger(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

  /// Writes one line at `level` (formatted already).
  void write(Level level, std::string_view message) const;
  /// Whether a line at `level` would reach any sink (to skip expensive formatting).
  bool enabled(Level level) const;
  /// Flushes this logger's sinks.
  void flush() const;

  template <class... Args>
  void trace(fmt::format_string<Args...> f, Args&&... args) const {
    emit(Level::trace, f, std::forward<Args>(args)...);
  }
  template <class... Args>
  void debug(fmt::format_string<Args...> f, Args&&... args) const {
    emit(Level::debug, f, std::forward<Args>(args)...);
  }
  template <class... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) const {
    emit(Level::info, f, std::forward<Args>(args)...);
  }
  template <class... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) const {
    emit(Level::warn, f, std::forward<Args>(args)...);
  }
  template <class... Args>
  void error(fmt::format_string<Args...> f, Args&&... args) const {
    emit(Level::error, f, std::forward<Args>(args)...);
  }

 private:
  template <class... Args>
  void emit(Level level, fmt::format_string<Args...> f, Args&&... args) const {
    if (enabled(level)) write(level, fmt::format(f, std::forward<Args>(args)...));
  }
  std::shared_ptr<Impl> impl_;
};

/// The logger for `subsystem`, created on first use with the current sinks. Thread-safe.
std::shared_ptr<const Logger> get(std::string_view subsystem);

}  // namespace kiln::log
