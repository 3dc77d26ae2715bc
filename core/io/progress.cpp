// TTY-aware progress line.
#include "kiln/io/progress.hpp"

#include <unistd.h>

#include "kiln/errors.hpp"

namespace kiln::io {

Progress::Progress(Mode mode, bool enabled, std::FILE* out) : out_(out), enabled_(enabled) {
  const bool tty = ::isatty(::fileno(out)) != 0;
  live_ = enabled && (mode == Mode::always || (mode == Mode::automatic && tty));
}

void Progress::update(const std::string& text) {
  if (!live_) return;
  const auto now = std::chrono::steady_clock::now();
  if (dirty_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  std::fprintf(out_, "\r\033[2K%s", text.c_str());
  std::fflush(out_);
  dirty_ = true;
}

void Progress::line(const std::string& text) {
  if (!enabled_) return;
  if (dirty_) std::fprintf(out_, "\r\033[2K");
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
  dirty_ = false;
}

Progress::Mode parse_progress_mode(const std::string& text, const std::string& where) {
  if (text == "auto") return Progress::Mode::automatic;
  if (text == "always") return Progress::Mode::always;
  if (text == "never") return Progress::Mode::never;
  throw ConfigError(where + " = '" + text + "' is not one of auto, always, never");
}

}  // namespace kiln::io
