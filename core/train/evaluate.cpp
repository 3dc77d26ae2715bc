// The evaluation pass (see evaluate.hpp).
#include "kiln/train/evaluate.hpp"

namespace kiln::train {

EvalSums evaluate_pass(const EvalParts& p, std::int64_t epoch, const LogitsCallback& on_logits) {
  Backend& backend = *p.backend;
  p.precision->before_forward(backend, p.model->parameters());
  p.loss->reset_totals();
  if (p.top_k) p.top_k->reset();
  double local_samples = 0;
  p.loader->start_epoch(epoch);
  for (std::int64_t batches = 0; p.max_batches == 0 || batches < p.max_batches; ++batches) {
    const std::optional<data::Batch> batch = p.loader->next();
    if (!batch) break;
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
    if (p.top_k) p.top_k->add(logits, y, batch->valid_rows);
    if (on_logits) on_logits(*batch, y, logits);
    local_samples += static_cast<double>(batch->valid_rows);
    if (p.after_batch) p.after_batch(*batch);
  }
  const auto [loss_sum, correct] = p.loss->totals();
  EvalSums sums{loss_sum, correct, local_samples, std::nullopt};
  if (p.top_k) sums.top_k_hits = p.top_k->total();
  return sums;
}

}  // namespace kiln::train
