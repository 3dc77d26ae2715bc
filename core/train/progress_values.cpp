// The progress display's values (see the header).
#include "kiln/train/progress_values.hpp"

#include <fmt/format.h>

namespace kiln::train {
namespace {

void add_running(ProgressValues& out, double loss_sum, double correct, double samples) {
  if (samples <= 0) return;  // nothing seen yet: no number rather than a misleading 0
  out.emplace_back("loss", fmt::format("{:.4f}", loss_sum / samples));
  out.emplace_back("acc", fmt::format("{:.4f}", correct / samples));
}

}  // namespace

ProgressValues train_progress_values(double loss_sum, double correct, double samples, double lr,
                                     const std::map<std::string, double>& precision_metrics) {
  ProgressValues out;
  add_running(out, loss_sum, correct, samples);
  out.emplace_back("lr", fmt::format("{:.3g}", lr));
  if (auto it = precision_metrics.find("loss_scale"); it != precision_metrics.end()) {
    out.emplace_back("scale", fmt::format("{:g}", it->second));
  }
  if (auto it = precision_metrics.find("skipped_steps"); it != precision_metrics.end() && it->second > 0) {
    out.emplace_back("skipped", fmt::format("{:.0f}", it->second));
  }
  return out;
}

ProgressValues eval_progress_values(double loss_sum, double correct, double samples) {
  ProgressValues out;
  add_running(out, loss_sum, correct, samples);
  return out;
}

}  // namespace kiln::train
