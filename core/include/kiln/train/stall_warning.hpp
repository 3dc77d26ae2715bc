// A warning, long before the timeout, that this rank has been waiting in one collective.
//
// Why: a hung multi-rank job is silent until dist.timeout_s (300 s by default) ends it. Horovod's
// stall inspector warns after 60 s and names the ranks that did not submit; users expect the same
// (pain #4 in conventions.md: "warn at N s and abort at M s"). A rank cannot tell on its own
// which peer is missing, but its collective record can (collective_recorder.hpp): so the warning
// names the collective, says when the run will give up, and says how to learn the missing rank
// now -- stop the job, which makes every rank write its record, and run `kiln collectives`.
//
// A thread looks at the recorder's entries every quarter of `warn_after` (at most every second)
// and warns once per collective that has been waited for longer. Only while the run trains
// (run.cpp makes one next to the record-on-signal watcher); [dist] warn_after_s, 0 = off.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kiln/train/collective_trace.hpp"

namespace kiln::train {

class CollectiveRecorder;

struct StallWarningOptions {
  std::chrono::milliseconds warn_after{60000};
  double timeout_s = 300;            ///< dist.timeout_s, for the message
  std::filesystem::path run_dir;     ///< for the `kiln collectives` command in the message
};

/// The collective in `trace` this rank has waited for longest, if it has waited at least
/// `o.warn_after` by `now_ms` and its sequence number is above `warned_up_to`: {its seq, the
/// warning}. Pure, for the tests.
std::optional<std::pair<std::int64_t, std::string>> stall_warning(const RankTrace& trace, std::int64_t now_ms,
                                                                  const StallWarningOptions& o,
                                                                  std::int64_t warned_up_to);

class StallWarning {
 public:
  using Say = std::function<void(const std::string&)>;
  /// Starts the watching thread; `say` defaults to a warning in the "dist" log.
  StallWarning(std::shared_ptr<CollectiveRecorder> recorder, StallWarningOptions options, Say say = {});
  ~StallWarning();
  StallWarning(const StallWarning&) = delete;
  StallWarning& operator=(const StallWarning&) = delete;

 private:
  void watch();

  std::shared_ptr<CollectiveRecorder> recorder_;
  StallWarningOptions options_;
  Say say_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kiln::train
