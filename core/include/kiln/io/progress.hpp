// The progress display on rank 0: on a terminal, one line rewritten in place during an epoch
// (at most ~5 times a second); on a pipe or file, nothing until the epoch's summary line, so logs
// are not flooded with carriage returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::io {

class Progress {
 public:
  enum class Mode : std::uint8_t { automatic, always, never };
  /// `enabled` is false on ranks other than 0.
  Progress(Mode mode, bool enabled, std::FILE* out = stdout);
  /// Updates the live line (throttled). `text` must not contain newlines.
  void update(const std::string& text);
  /// Clears the live line and prints `text` as a permanent line.
  void line(const std::string& text);
  bool live() const noexcept { return live_; }

 private:
  std::FILE* out_;
  bool enabled_;
  bool live_;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_{};
};

/// "auto" | "always" | "never".
Progress::Mode parse_progress_mode(const std::string& text, const std::string& where);

}  // namespace kiln::io
