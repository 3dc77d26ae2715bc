// The progress display on rank 0 ([log] progress, progress_every_s).
//
// On a terminal, one line redrawn in place (at most 5 times a second): a bar, steps, elapsed<ETA,
// samples/s and the caller's values (running loss, lr). On a pipe or a file, where carriage
// returns would pile up, a plain line instead whenever nothing has been printed for
// `every_s` seconds, so a long epoch still shows it is alive in a log. Permanent lines (the
// epoch summaries) go through line(), which erases a live line first. The text is
// progress_format.hpp's; the clock, the FILE* and whether it is a terminal can be injected.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::io {

class Progress {
 public:
  /// automatic: redrawn on a terminal, plain lines otherwise; always: redrawn even when not a
  /// terminal (a console that understands "\r"); never: only the permanent lines.
  enum class Mode : std::uint8_t { automatic, always, never };

  struct Options {
    Mode mode = Mode::automatic;
    bool enabled = true;        ///< false on ranks other than 0: nothing is printed at all
    std::FILE* out = stdout;
    double every_s = 30;        ///< plain lines: at most one per this many seconds; 0 = every update
    double redraw_s = 0.2;      ///< live line: at most one redraw per this many seconds
    std::optional<bool> terminal;  ///< default: isatty(out)
    int width = -1;             ///< live line's maximum width; -1 asks the terminal, 0 = no limit
    std::function<double()> clock;  ///< monotonic seconds; default std::chrono::steady_clock
  };

  explicit Progress(Options options);

  /// Starts a phase ("epoch 3/10" with `total_steps` steps): elapsed time and ETA count from here.
  void begin(std::string phase, std::int64_t total_steps);
  /// Whether update() would be shown now. Callers check it first when computing the values costs
  /// something (reading the running loss waits for a GPU).
  bool due() const;
  /// Shows the phase's progress: `done` steps and `samples` (over all ranks) so far, with
  /// `values` ("loss" -> "0.4321") after the rate. Shown even when not due(); never on a
  /// disabled or never-mode display.
  void update(std::int64_t done, double samples, std::vector<std::pair<std::string, std::string>> values);
  /// Erases a live line and prints `text` as a permanent line (also with mode never).
  void line(const std::string& text);
  /// Erases a live line, if one is shown (before other output to the same terminal).
  void clear();

  /// True when updates are redrawn in place, false when they are plain lines or not shown.
  bool live() const noexcept { return live_; }
  bool shows_updates() const noexcept { return shows_updates_; }

 private:
  double now() const;
  int live_width() const;

  Options opt_;
  bool live_ = false;
  bool shows_updates_ = false;
  bool dirty_ = false;         // a live line is on screen
  double last_output_ = 0;     // when anything was last printed
  std::string phase_;
  std::int64_t total_ = 0;
  double phase_start_ = 0;
};

/// "auto" | "always" | "never"; anything else is a ConfigError naming `where`.
Progress::Mode parse_progress_mode(const std::string& text, const std::string& where);

}  // namespace kiln::io
