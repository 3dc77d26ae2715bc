// The progress display (see the header for what is shown where).
#include "kiln/io/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>

#include "kiln/errors.hpp"
#include "kiln/io/progress_format.hpp"

namespace kiln::io {

Progress::Progress(Options options) : opt_(std::move(options)) {
  if (!opt_.clock) {
    opt_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
  const bool terminal = opt_.terminal ? *opt_.terminal : ::isatty(::fileno(opt_.out)) != 0;
  shows_updates_ = opt_.enabled && opt_.mode != Mode::never;
  live_ = shows_updates_ && (opt_.mode == Mode::always || terminal);
  last_output_ = now();
  phase_start_ = last_output_;
}

double Progress::now() const { return opt_.clock(); }

int Progress::live_width() const {
  if (opt_.width >= 0) return opt_.width;
  winsize ws{};
  // Asked at every redraw so a resized terminal is followed; 0 (no limit) when it cannot say.
  if (::ioctl(::fileno(opt_.out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col - 1;
  return 0;
}

void Progress::begin(std::string phase, std::int64_t total_steps) {
  phase_ = std::move(phase);
  total_ = total_steps;
  phase_start_ = now();
}

bool Progress::due() const {
  if (!shows_updates_) return false;
  const double since = now() - last_output_;
  if (live_) return !dirty_ || since >= opt_.redraw_s;
  return since >= opt_.every_s;
}

void Progress::update(std::int64_t done, double samples, std::vector<std::pair<std::string, std::string>> values) {
  if (!shows_updates_) return;
  const double t = now();
  ProgressStatus s{phase_, done, total_, t - phase_start_, samples, std::move(values)};
  if (live_) {
    std::fprintf(opt_.out, "\r\033[2K%s", format_live(s, live_width()).c_str());
    dirty_ = true;
  } else {
    std::fprintf(opt_.out, "%s\n", format_plain(s).c_str());
  }
  std::fflush(opt_.out);
  last_output_ = t;
}

void Progress::line(const std::string& text) {
  if (!opt_.enabled) return;
  if (dirty_) std::fprintf(opt_.out, "\r\033[2K");
  std::fprintf(opt_.out, "%s\n", text.c_str());
  std::fflush(opt_.out);
  dirty_ = false;
  last_output_ = now();
}

void Progress::clear() {
  if (!dirty_) return;
  std::fprintf(opt_.out, "\r\033[2K");
  std::fflush(opt_.out);
  dirty_ = false;
}

Progress::Mode parse_progress_mode(const std::string& text, const std::string& where) {
  if (text == "auto") return Progress::Mode::automatic;
  if (text == "always") return Progress::Mode::always;
  if (text == "never") return Progress::Mode::never;
  throw ConfigError(where + " = '" + text + "' is not one of auto, always, never");
}

}  // namespace kiln::io
