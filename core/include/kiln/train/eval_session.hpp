// A finished run rebuilt for evaluation (`kiln eval`, `kiln predict`).
//
// From <run_dir>/config.toml (the run's resolved config) plus --set overrides, validated by the
// same rules as `kiln train` (every table; wiring.hpp), it creates the run's backend, model and
// precision policy for a world of one rank, the [data.eval] source, and loads a checkpoint's
// weights and buffers (checkpoint.hpp's load_checkpoint; the optimizer state it also reads is
// not used), or with averaged_weights those of its model_ema.safetensors ([ema]) in their place. No communicator is created: one rank needs none, and a run trained with nccl or
// gloo can be evaluated where those cannot connect. Nothing is written anywhere, and the log
// stays on the console at warn level so stdout carries only the result.
//
// The eval loader uses the run's [loader] eval_batch and eval_last_batch, unshuffled, so an
// evaluation of a one-rank run's checkpoint reproduces the "test" record it wrote for that epoch.
// With every_sample the last-batch policy is "partial" whatever the run used: every sample once.
//
// Errors, each one line: IoError for a missing run directory, config.toml or checkpoint;
// ConfigError for a run (after overrides) without [data.eval], for config mistakes and for eval
// data that names its classes otherwise than the checkpoint's training data; DataError when the
// checkpoint does not fit the model (naming the tensor); plugin errors name the plugin.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/train/evaluate.hpp"

namespace kiln::train {

struct EvalRequest {
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint;                ///< empty: the newest complete one in run_dir/checkpoints
  std::vector<std::string> overrides;              ///< "--set key=value" texts, applied to config.toml
  std::vector<std::filesystem::path> plugin_dirs;  ///< --plugin-path entries
  bool every_sample = false;                       ///< force the "partial" last batch (predict)
  bool unlabeled_ok = false;                       ///< accept eval data without labels (predict)
  bool top_k_accuracy = true;                      ///< count the top-5 hits (predict reports none)
  /// Use the checkpoint's averaged weights ([ema], model_ema.safetensors) instead of model.safetensors;
  /// an IoError when the checkpoint has none.
  bool averaged_weights = false;
};

class EvalSession {
 public:
  /// Builds everything and loads the checkpoint; throws as described above.
  explicit EvalSession(const EvalRequest& request);
  ~EvalSession();
  EvalSession(const EvalSession&) = delete;
  EvalSession& operator=(const EvalSession&) = delete;

  /// One pass over the eval data in its order; `on_logits` sees each batch's f32 logits.
  EvalSums run(const LogitsCallback& on_logits = {});

  /// One batch's samples on the host: `rows` labels and rows x num_classes() f32 logits, row-major.
  using HostBatchCallback = std::function<void(std::int64_t rows, const std::int32_t* labels, const float* logits)>;
  /// run(), with each batch's labels and logits copied to the host first.
  EvalSums run_on_host(const HostBatchCallback& on_batch);

  /// The checkpoint directory the weights came from.
  const std::filesystem::path& checkpoint() const;
  /// The model's number of outputs.
  std::int64_t num_classes() const;
  /// What the classes are called: the names the checkpoint recorded from its training data, else
  /// the eval source's; empty when neither names them (class_names.hpp). The constructor refuses
  /// eval data that numbers the classes otherwise than the checkpoint.
  const std::vector<std::string>& class_names() const;
  /// Whether the eval data has labels (only with EvalRequest::unlabeled_ok can it have none;
  /// then each batch's labels are 0 and the loss and accuracy mean nothing).
  bool labeled() const;
  /// What the eval source calls sample `index` (DataSource::sample_id; "" when it names none).
  std::string sample_id(std::int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::train
