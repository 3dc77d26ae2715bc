// The early warning of a collective this rank has waited in for long (see the header).
#include "kiln/train/stall_warning.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kiln/sdk/log.hpp"
#include "kiln/train/collective_recorder.hpp"
#include "kiln/train/collective_report.hpp"

namespace kiln::train {
namespace {

/// "75", or "2.5" below ten seconds (a short dist.warn_after_s while debugging).
std::string seconds(std::int64_t ms) {
  const double s = static_cast<double>(ms) / 1000.0;
  return s < 10 ? fmt::format("{:.1f}", s) : fmt::format("{:.0f}", s);
}

}  // namespace

std::optional<std::pair<std::int64_t, std::string>> stall_warning(const RankTrace& trace, std::int64_t now,
                                                                  const StallWarningOptions& o,
                                                                  std::int64_t warned_up_to) {
  const CollectiveEntry* oldest = nullptr;
  for (const CollectiveEntry& e : trace.entries) {
    if (e.wait_ms < 0 || e.end_ms >= 0 || e.seq <= warned_up_to) continue;
    if (!oldest || e.wait_ms < oldest->wait_ms) oldest = &e;
  }
  if (!oldest || now - oldest->wait_ms < o.warn_after.count()) return std::nullopt;
  const std::string run_dir = o.run_dir.empty() ? "DIR" : o.run_dir.string();
  return std::pair{oldest->seq,
                   fmt::format("rank {} has waited {} s in collective #{} {}; it gives up after {:g} s "
                               "(dist.timeout_s). To learn now which rank the others wait for, stop the job (Ctrl-C, or "
                               "SIGTERM to every rank: each writes its latest collectives) and run `kiln collectives "
                               "--run-dir {}`",
                               trace.rank, seconds(now - oldest->wait_ms), oldest->seq,
                               describe_entry(*oldest), o.timeout_s, run_dir)};
}

StallWarning::StallWarning(std::shared_ptr<CollectiveRecorder> recorder, StallWarningOptions options, Say say)
    : recorder_(std::move(recorder)), options_(std::move(options)), say_(std::move(say)) {
  if (!say_) say_ = [](const std::string& text) { log::get("dist")->warn("{}", text); };
  thread_ = std::thread([this] { watch(); });
}

StallWarning::~StallWarning() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StallWarning::watch() {
  const auto period = std::clamp<std::chrono::milliseconds>(options_.warn_after / 4, std::chrono::milliseconds(1),
                                                            std::chrono::milliseconds(1000));
  std::int64_t warned_up_to = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
    const auto found = stall_warning(recorder_->snapshot(""), wall_clock_ms(), options_, warned_up_to);
    if (!found) continue;
    warned_up_to = found->first;
    say_(found->second);
  }
}

}  // namespace kiln::train
