// The profile table and JSON (kiln/profile/op_stats.hpp).
#include "kiln/profile/op_stats.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/io/json.hpp"

namespace kiln::profile {
namespace {

/// Rows by total time, largest first (ties by name, so the order is stable).
std::vector<std::pair<std::string, OpStats>> by_time(const Profile& p) {
  std::vector<std::pair<std::string, OpStats>> rows(p.ops.begin(), p.ops.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  return rows;
}

double ops_seconds(const Profile& p) {
  double total = 0;
  for (const auto& [key, s] : p.ops) total += s.seconds;
  return total;
}

/// "op dtype" -> ("op", "dtype").
std::pair<std::string, std::string> split_key(const std::string& key) {
  const auto space = key.rfind(' ');
  if (space == std::string::npos) return {key, ""};
  return {key.substr(0, space), key.substr(space + 1)};
}

std::string json_number_or_null(double v, bool known) { return known ? fmt::format("{:.6g}", v) : "null"; }

std::string rate_cell(double rate, double peak, bool known) {
  if (!known) return "-";
  if (peak > 0) return fmt::format("{:.1f} ({:.0f}%)", rate, 100.0 * rate / peak);
  return fmt::format("{:.1f}", rate);
}

}  // namespace

std::string format_table(const Profile& p, const std::string& device) {
  std::string out = fmt::format("profile: {} steps after {} warm-up, {:.2f} ms per step; device {}\n", p.steps,
                                p.warmup, p.steps > 0 ? 1e3 * p.step_seconds / static_cast<double>(p.steps) : 0.0,
                                device);
  const double peak_gflops = p.peaks.flops_per_s / 1e9;
  const double peak_gbps = p.peaks.bytes_per_s / 1e9;
  if (p.peaks.flops_per_s > 0) {
    out += fmt::format("peaks (measured here): {:.1f} GFLOP/s ({}), {:.1f} GB/s (64 MiB copy)\n", peak_gflops,
                       p.peaks.flops_what, peak_gbps);
  }
  if (p.steps == 0) return out + "no step was profiled: the run had no more steps than the warm-up\n";
  if (p.memory.reported) {
    out += fmt::format("memory (the backend's allocator): {:.0f} MiB live at step start, at most {:.0f} MiB after an "
                       "op (after {}), peak {:.0f} MiB since the start\n",
                       p.memory.at_step_start_mib, p.memory.most_after_op_mib,
                       p.memory.most_after_op.empty() ? "-" : p.memory.most_after_op, p.memory.peak_mib);
  }
  out += fmt::format("{:<26} {:<9} {:>7} {:>10} {:>10} {:>7} {:>16} {:>14}\n", "op", "dtype", "calls", "total ms",
                     "ms/step", "share", "GFLOP/s (peak)", "GB/s (peak)");
  for (const auto& [key, s] : by_time(p)) {
    const auto [op, dtype] = split_key(key);
    const double gflops = s.seconds > 0 ? s.flops / s.seconds / 1e9 : 0;
    const double gbps = s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0;
    out += fmt::format("{:<26} {:<9} {:>7} {:>10.2f} {:>10.3f} {:>6.1f}% {:>16} {:>14}\n", op, dtype, s.calls,
                       1e3 * s.seconds, 1e3 * s.seconds / static_cast<double>(p.steps),
                       100.0 * s.seconds / p.step_seconds, rate_cell(gflops, peak_gflops, s.flops > 0),
                       rate_cell(gbps, peak_gbps, s.bytes > 0));
  }
  const double rest = std::max(0.0, p.step_seconds - ops_seconds(p));
  out += fmt::format("{:<26} {:<9} {:>7} {:>10.2f} {:>10.3f} {:>6.1f}%\n", "(outside backend ops)", "", "",
                     1e3 * rest, 1e3 * rest / static_cast<double>(p.steps), 100.0 * rest / p.step_seconds);
  return out;
}

std::string to_json(const Profile& p, const std::string& device) {
  std::string out = fmt::format(
      "{{\"device\": {}, \"steps\": {}, \"warmup_steps\": {}, \"step_ms\": {}, \"peaks\": {{\"gflops\": {}, "
      "\"gflops_what\": {}, \"gbps\": {}}}, ",
      io::json_quoted(device), p.steps, p.warmup,
      json_number_or_null(p.steps > 0 ? 1e3 * p.step_seconds / static_cast<double>(p.steps) : 0, p.steps > 0),
      json_number_or_null(p.peaks.flops_per_s / 1e9, p.peaks.flops_per_s > 0), io::json_quoted(p.peaks.flops_what),
      json_number_or_null(p.peaks.bytes_per_s / 1e9, p.peaks.bytes_per_s > 0));
  if (p.memory.reported) {
    out += fmt::format("\"memory_mib\": {{\"at_step_start\": {:.6g}, \"most_after_op\": {:.6g}, "
                       "\"most_after_op_row\": {}, \"peak\": {:.6g}}}, ",
                       p.memory.at_step_start_mib, p.memory.most_after_op_mib, io::json_quoted(p.memory.most_after_op),
                       p.memory.peak_mib);
  }
  out += "\"ops\": [";
  bool first = true;
  for (const auto& [key, s] : by_time(p)) {
    const auto [op, dtype] = split_key(key);
    out += fmt::format(
        "{}{{\"op\": {}, \"dtype\": {}, \"calls\": {}, \"total_ms\": {:.6g}, \"share\": {}, \"gflops\": {}, "
        "\"gbps\": {}}}",
        first ? "" : ", ", io::json_quoted(op), io::json_quoted(dtype), s.calls, 1e3 * s.seconds,
        json_number_or_null(s.seconds / p.step_seconds, p.step_seconds > 0),
        json_number_or_null(s.seconds > 0 ? s.flops / s.seconds / 1e9 : 0, s.flops > 0 && s.seconds > 0),
        json_number_or_null(s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0, s.bytes > 0 && s.seconds > 0));
    first = false;
  }
  return out + "]}\n";
}

}  // namespace kiln::profile
