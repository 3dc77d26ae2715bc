// The text of the progress display: pure functions of numbers, so they are tested without a
// clock or a terminal (progress.hpp decides when and where the text goes).
//
// Live line (a terminal, redrawn in place):
//   epoch 3/10 [#######.............] 412/937  44% 00:23<00:29 | 5.21k samples/s | loss 0.4321 | lr 0.001
// Plain line (a pipe or a file, one every [log] progress_every_s):
//   epoch 3/10 step 412/937 (44%) elapsed 00:23 eta 00:29 | 5.21k samples/s | loss 0.4321 | lr 0.001
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::io {

/// What one progress update shows. `values` are (name, text) pairs appended in order
/// ("loss" -> "0.4321"); the caller formats them, since only it knows their precision.
struct ProgressStatus {
  std::string phase;           ///< "epoch 3/10", "eval 3/10"
  std::int64_t done = 0;       ///< steps finished in this phase
  std::int64_t total = 0;      ///< steps in this phase (0: unknown, no bar, no ETA)
  double elapsed_s = 0;        ///< since the phase began
  double samples = 0;          ///< samples finished in this phase, over all ranks
  std::vector<std::pair<std::string, std::string>> values;
};

/// Seconds as "MM:SS", or "H:MM:SS" from one hour on; negative or non-finite as "--:--".
std::string format_duration(double seconds);

/// A count with an SI suffix and three significant digits: 950, 5.21k, 12.3k, 1.50M.
std::string format_si(double value);

/// Seconds left at the phase's mean step rate so far; none before the first step is done or when
/// the total is unknown, 0 once done >= total.
std::optional<double> eta_seconds(std::int64_t done, std::int64_t total, double elapsed_s);

/// `width` characters between brackets, '#' for the done fraction (clamped to [0, 1]).
std::string format_bar(double fraction, int width);

/// The live line, cut to `max_width` characters when max_width > 0 (a line wider than the
/// terminal wraps, and the next redraw could no longer erase it).
std::string format_live(const ProgressStatus& status, int max_width = 0);

/// The plain line: no bar and no control characters, for logs.
std::string format_plain(const ProgressStatus& status);

}  // namespace kiln::io
