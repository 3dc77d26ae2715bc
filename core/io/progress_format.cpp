// The progress display's text (see the header for the two layouts).
#include "kiln/io/progress_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kiln::io {
namespace {

double percent(const ProgressStatus& s) {
  return s.total > 0 ? 100.0 * std::clamp(static_cast<double>(s.done) / static_cast<double>(s.total), 0.0, 1.0) : 0.0;
}

/// " | 5.21k samples/s | loss 0.4321 | lr 0.001": the parts both layouts share.
std::string tail(const ProgressStatus& s) {
  std::string out;
  if (s.elapsed_s > 0) out += fmt::format(" | {} samples/s", format_si(s.samples / s.elapsed_s));
  for (const auto& [name, text] : s.values) out += fmt::format(" | {} {}", name, text);
  return out;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto total = static_cast<std::int64_t>(std::llround(seconds));
  const std::int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{:02}:{:02}", m, s);
}

std::string format_si(double value) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  const double a = std::abs(value);
  auto three = [](double v, const char* suffix) {
    // Three significant digits: 5.21, 52.1, 521.
    const int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
    return fmt::format("{:.{}f}{}", v, decimals, suffix);
  };
  // 999.7 rounds to "1000" at zero decimals: move such values to the next suffix instead.
  if (a >= 999.5e6) return three(value / 1e9, "G");
  if (a >= 999.5e3) return three(value / 1e6, "M");
  if (a >= 999.5) return three(value / 1e3, "k");
  return fmt::format("{:.0f}", value);
}

std::optional<double> eta_seconds(std::int64_t done, std::int64_t total, double elapsed_s) {
  if (total <= 0 || done <= 0 || !(elapsed_s >= 0)) return std::nullopt;
  if (done >= total) return 0.0;
  return elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
}

std::string format_bar(double fraction, int width) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  const int filled = static_cast<int>(std::floor(f * width));
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '.') + "]";
}

std::string format_live(const ProgressStatus& s, int max_width) {
  std::string out = s.phase;
  if (s.total > 0) {
    out += fmt::format(" {} {}/{} {:3.0f}%", format_bar(static_cast<double>(s.done) / static_cast<double>(s.total), 20),
                       s.done, s.total, percent(s));
    const auto eta = eta_seconds(s.done, s.total, s.elapsed_s);
    out += fmt::format(" {}<{}", format_duration(s.elapsed_s), eta ? format_duration(*eta) : "--:--");
  } else {
    out += fmt::format(" step {} {}", s.done, format_duration(s.elapsed_s));
  }
  out += tail(s);
  if (max_width > 0 && out.size() > static_cast<std::size_t>(max_width)) out.resize(static_cast<std::size_t>(max_width));
  return out;
}

std::string format_plain(const ProgressStatus& s) {
  std::string out = s.phase;
  if (s.total > 0) {
    out += fmt::format(" step {}/{} ({:.0f}%) elapsed {}", s.done, s.total, percent(s), format_duration(s.elapsed_s));
    const auto eta = eta_seconds(s.done, s.total, s.elapsed_s);
    out += fmt::format(" eta {}", eta ? format_duration(*eta) : "--:--");
  } else {
    out += fmt::format(" step {} elapsed {}", s.done, format_duration(s.elapsed_s));
  }
  return out + tail(s);
}

}  // namespace kiln::io
