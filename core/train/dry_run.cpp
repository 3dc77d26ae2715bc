// The dry run's summary (see the header).
#include "kiln/train/dry_run.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace kiln::train {
namespace {

/// "4.5 ms", "41.3 s", "10 min 50 s", "2 h 5 min": an estimate, so three figures at most.
std::string duration(double seconds) {
  if (seconds < 1) return fmt::format("{:.3g} ms", seconds * 1e3);
  if (seconds < 59.5) return fmt::format("{:.3g} s", seconds);
  const std::int64_t s = std::llround(seconds);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  return fmt::format("{} h {} min", s / 3600, (s % 3600 + 30) / 60);
}

}  // namespace

double host_peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: kilobytes
}

std::vector<std::string> dry_run_summary(const DryRunReport& r, double host_peak_mb) {
  std::vector<std::string> out;
  const std::vector<double>& s = r.step_seconds;
  const std::size_t n = s.size();
  const double total = std::accumulate(s.begin(), s.end(), 0.0);
  // The first step makes the backend's plans and first-touches its memory: the pace is the rest's.
  const double pace = n > 1 ? (total - s[0]) / static_cast<double>(n - 1) : n == 1 ? s[0] : 0.0;
  std::string steps = fmt::format("dry run: {} of {} optimizer step{} of epoch {} in {}", n, r.steps_per_epoch,
                                  r.steps_per_epoch == 1 ? "" : "s", r.epoch, duration(total));
  if (n > 1) steps += fmt::format(" (the first {}, then {} each)", duration(s[0]), duration(pace));
  out.push_back(steps + fmt::format("; train loss {:.4f}", r.train_loss));
  double eval_epoch = 0;
  if (r.eval_batches > 0) {
    const double passes = static_cast<double>(std::max<std::int64_t>(1, r.eval_passes));
    const double per_batch = r.eval_seconds / (static_cast<double>(r.eval_batches) * passes);
    eval_epoch = per_batch * static_cast<double>(r.eval_batches_per_epoch) * passes;
    out.push_back(fmt::format("dry run: {} of {} eval batches{} in {} ({} each)", r.eval_batches,
                              r.eval_batches_per_epoch,
                              r.eval_passes > 1 ? ", twice (the weights and their moving average)" : "",
                              duration(r.eval_seconds), duration(per_batch)));
  }
  if (r.checkpoint_seconds) {
    out.push_back(fmt::format("dry run: a checkpoint of {:.1f} MB written in {} (checkpoints/dry-run, not kept)",
                              r.checkpoint_mb, duration(*r.checkpoint_seconds)));
  }
  const double train_epoch = pace * static_cast<double>(r.steps_per_epoch);
  const std::string eval_part = r.eval_batches > 0 ? fmt::format(" + eval {}", duration(eval_epoch)) : "";
  std::string memory = fmt::format("peak memory {:.0f} MB on the host", host_peak_mb);
  if (r.device_peak_mib) memory += fmt::format(", {:.0f} MiB on the device", *r.device_peak_mib);
  const std::int64_t evals = r.evals_left < 0 ? r.epochs_left : r.evals_left;
  const double run_seconds =
      static_cast<double>(r.epochs_left) * train_epoch + static_cast<double>(evals) * eval_epoch;
  const std::string evaluated = r.eval_batches > 0 && evals != r.epochs_left
                                    ? fmt::format(" (evaluated after {} of them)", evals)
                                    : "";
  const std::string run = r.epochs_left > 0
                              ? fmt::format("the {} epoch{}{} to train about {}", r.epochs_left,
                                            r.epochs_left == 1 ? "" : "s", evaluated, duration(run_seconds))
                              : "but the checkpoint holds every epoch of the run: it has nothing left to train";
  // One step is all warm-up (plans, first-touched memory): a pace from it overstates, often by 10x.
  const std::string pace_from_warmup =
      n == 1 ? " (paced by the one step, which makes the plans: an overestimate; --dry-run-steps 3 or more "
               "paces by the steps after it)"
             : "";
  out.push_back(fmt::format("dry run: at that pace an epoch takes about {}{} (train {}{}), {}; {}",
                            duration(train_epoch + eval_epoch), pace_from_warmup, duration(train_epoch), eval_part,
                            run, memory));
  return out;
}

}  // namespace kiln::train
