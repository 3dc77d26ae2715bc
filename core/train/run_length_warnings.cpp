// Settings a run is too short for (see the header).
#include "kiln/train/run_length_warnings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln::train {
namespace {

// "early_stop.patience = 3 (default)", "schedule.warmup_epochs = 5 (--set schedule.warmup_epochs)"
std::string setting(const ParamMap& table, const std::string& key, const std::string& value) {
  const auto it = table.entries().find(key);
  const std::string origin = it != table.entries().end() ? fmt::format(" ({})", it->second.origin) : "";
  return fmt::format("{}.{} = {}{}", table.table(), key, value, origin);
}

// "milestone 30 comes" / "milestones 30, 60 come"
std::string milestones_text(const std::vector<std::int64_t>& late) {
  return fmt::format("{} {} {}", late.size() == 1 ? "milestone" : "milestones", fmt::join(late, ", "),
                     late.size() == 1 ? "comes" : "come");
}

// The epoch after which a patience-driven rule (plateau, early stopping) acts at the earliest: the
// first reading sets the best, then `patience` readings must fail to beat it. A rule watching an
// eval metric reads one every run.eval_every_epochs epochs. Acting after the last epoch changes
// nothing, so the rule matters only when this epoch comes before the run's end.
std::int64_t earliest_action(std::int64_t patience, const std::string& metric, std::int64_t eval_every) {
  return (patience + 1) * (metric.starts_with("eval_") ? eval_every : 1);
}

}  // namespace

std::vector<std::string> run_length_warnings(const CoreTables& core, std::int64_t epochs) {
  std::vector<std::string> out;
  const ParamMap& schedule = core.schedule;
  const std::string epochs_text = fmt::format("run.epochs = {}", epochs);

  const double warmup = schedule.contains("warmup_epochs") ? schedule.get_float("warmup_epochs") : 0.0;
  if (warmup > static_cast<double>(epochs)) {
    out.push_back(fmt::format("{} is longer than the run ({}): the rate rises for the whole run and ends at {:.3g}% "
                              "of optimizer.lr, never reaching it",
                              setting(schedule, "warmup_epochs", fmt::format("{:g}", warmup)), epochs_text,
                              100.0 * static_cast<double>(epochs) / warmup));
  }
  if (core.schedule_type == "step" && schedule.contains("milestones")) {
    std::vector<std::int64_t> late;
    for (std::int64_t m : schedule.get<std::vector<std::int64_t>>("milestones")) {
      if (m >= epochs) late.push_back(m);  // milestone m applies from 0-based epoch m on
    }
    if (!late.empty()) {
      out.push_back(fmt::format("{}: {} at or after the run's end ({}), so the rate is never multiplied by gamma "
                                "there",
                                setting(schedule, "milestones",
                                        fmt::format("[{}]", fmt::join(schedule.get<std::vector<std::int64_t>>(
                                                                          "milestones"),
                                                                      ", "))),
                                milestones_text(late), epochs_text));
    }
  }
  // A patience rule of `table` watching `metric` that this run cannot outlast: "<setting>: <rule>
  // after epoch N at the earliest[ (its eval_loss is read every 3 epochs: ...)], <outcome>".
  const std::int64_t eval_every = core.run.get_int("eval_every_epochs");
  const auto patience_rule = [&](const ParamMap& table, const std::string& metric, std::string_view rule,
                                 const std::string& outcome) {
    const std::int64_t patience = table.get_int("patience");
    const std::int64_t earliest = earliest_action(patience, metric, eval_every);
    if (epochs > earliest) return;
    const std::string reading =
        metric.starts_with("eval_") && eval_every > 1
            ? fmt::format(" (its {} is read every {} epochs: run.eval_every_epochs)", metric, eval_every)
            : std::string();
    out.push_back(fmt::format("{}: {} after epoch {} at the earliest{}, {}",
                              setting(table, "patience", std::to_string(patience)), rule, earliest, reading, outcome));
  };
  if (core.schedule_type == "plateau") {
    patience_rule(schedule, schedule.get_string("metric"), "the plateau rule lowers the rate",
                  fmt::format("which leaves no epoch of this run ({}) to train at the lower rate; the rate stays at "
                              "optimizer.lr",
                              epochs_text));
  }
  if (const std::string metric = core.early_stop.get_string("metric"); !metric.empty()) {
    patience_rule(core.early_stop, metric, "early stopping ends a run",
                  fmt::format("and this one ({}) ends by then anyway, so it never stops early", epochs_text));
  }
  const std::int64_t every = core.log.get_int("histograms_every_epochs");
  if (every > epochs) {
    out.push_back(fmt::format("{}: histograms are written after epochs {}, {}, ..., so this run ({}) writes none",
                              setting(core.log, "histograms_every_epochs", std::to_string(every)), every, 2 * every,
                              epochs_text));
  }
  return out;
}

}  // namespace kiln::train
