// The evaluation pass (see evaluate.hpp).
#include "kiln/train/evaluate.hpp"

namespace kiln::train {

std::int64_t top_k_hits(const float* logits, const std::int32_t* labels, std::int64_t rows, std::int64_t classes,
                        std::int64_t k) {
  std::int64_t hits = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    const std::int32_t y = labels[r];
    const float mine = row[y];
    std::int64_t above = 0;  // classes ranked above the label's
    for (std::int64_t c = 0; c < classes && above < k; ++c) above += row[c] > mine || (row[c] == mine && c < y);
    hits += above < k;
  }
  return hits;
}

EvalSums evaluate_pass(const EvalParts& p, std::int64_t epoch, const LogitsCallback& on_logits) {
  Backend& backend = *p.backend;
  p.precision->before_forward(backend, p.model->parameters());
  p.loss->reset_totals();
  double local_samples = 0;
  p.loader->start_epoch(epoch);
  while (auto batch = p.loader->next()) {
    if (batch->rows == 0) {
      if (p.after_batch) p.after_batch(*batch);
      continue;
    }
    const Tensor x = backend.to_device(batch->inputs);
    const Tensor y = backend.to_device(batch->labels);
    // The uploads may still be queued (CUDA): the loader must not refill this batch's pinned
    // slot before they are done.
    p.loader->release_after(backend.record_event(StreamKind::compute));
    const Tensor logits = p.boundary->logits(p.model->forward(p.boundary->input(x), Mode::eval, 0));
    p.loss->forward(logits, y, batch->valid_rows);
    if (on_logits) on_logits(*batch, y, logits);
    local_samples += static_cast<double>(batch->valid_rows);
    if (p.after_batch) p.after_batch(*batch);
  }
  const auto [loss_sum, correct] = p.loss->totals();
  return EvalSums{loss_sum, correct, local_samples};
}

}  // namespace kiln::train
