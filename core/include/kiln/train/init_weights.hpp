// Fine-tuning: starting a run from weights in a safetensors file ([model] init, init_strict,
// init_exclude; the keys belong to the host, model_table.hpp).
//
// When: rank 0 reads and verifies the file while the config is checked, before the run directory
// exists (a missing or unreadable file fails the start with the key's file:line and leaves
// nothing behind). After the model is built, rank 0 copies the tensors into its parameters and
// buffers, and then the trainer broadcasts rank 0's values to every rank as it always does, so
// all ranks start identical and only rank 0 needs the file. A resumed run does not load it: the
// checkpoint holds the weights.
//
// Matching is by name (PyTorch state-dict names, which Kiln's models use), so a state dict saved
// by torchvision loads as it is:
//   - a model tensor matched by an init_exclude glob keeps its fresh initialisation, and a file
//     tensor matched by one is skipped: excluded names are neither required nor loaded (a new
//     head with another num_classes: init_exclude = ["fc.*"]);
//   - "<bn>.num_batches_tracked" counters in the file are ignored and counted in the report
//     (Kiln's batch norm uses a fixed momentum and keeps no counter);
//   - stored f32, f16, bf16 and f64 are converted to the model's dtype (f32 masters);
//   - a shape that differs is an error naming the tensor and both shapes;
//   - model tensors the file lacks ("missing") and file tensors the model lacks ("unexpected")
//     are listed: an error with init_strict = true (the default), a warning otherwise;
//   - an init_exclude pattern that matches no tensor of either side is the same (likely a typo).
// Errors are ConfigErrors that start with "model.init (<file>:<line>)".
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/model.hpp"
#include "kiln/params.hpp"

namespace kiln::train {

/// What [model] asks for.
struct InitRequest {
  std::filesystem::path file;        ///< absolute (anchored to the config file)
  bool strict = true;
  std::vector<std::string> exclude;  ///< glob patterns (fnmatch: *, ?, [...])
  std::string where;                 ///< "model.init (run.toml:5)", for messages
};

/// The request in [model]'s host keys (model_table.hpp), or nullopt when init is empty. Throws
/// ConfigError for an empty pattern or init_exclude without init.
std::optional<InitRequest> init_request(const ParamMap& host);

/// The file, read and verified (io/safetensors.hpp's checks).
struct InitWeights {
  InitRequest request;
  io::SafetensorsFile contents;
};

/// Reads `request.file`. Throws ConfigError naming the key, the file and what is wrong with it
/// (no such file, a directory, not a safetensors file).
std::shared_ptr<const InitWeights> read_init_weights(const InitRequest& request);

/// What load_init_weights did, by name.
struct InitReport {
  std::vector<std::string> loaded;      ///< model tensors given the file's values
  std::vector<std::string> excluded;    ///< model tensors kept fresh by init_exclude
  std::vector<std::string> skipped;     ///< file tensors skipped by init_exclude
  std::vector<std::string> counters;    ///< num_batches_tracked entries ignored
  std::vector<std::string> missing;     ///< model tensors the file lacks (kept fresh)
  std::vector<std::string> unexpected;  ///< file tensors the model lacks (unused)
  std::vector<std::string> unused_patterns;  ///< init_exclude patterns that matched nothing
};

/// Copies the file's tensors into a built model's parameters (master values) and buffers, and
/// logs the report (one info line; a warning for missing/unexpected names when not strict).
/// Throws ConfigError for a shape mismatch, a non-float tensor, or, under init_strict, missing
/// or unexpected names; nothing is copied then.
InitReport load_init_weights(const InitWeights& init, Backend& backend, const Model& model);

/// What the trainer calls on every rank when the run loads init weights (not when resuming):
/// rank 0 (which alone holds `init`; null elsewhere) runs load_init_weights, then tells every
/// rank whether it succeeded (one broadcast). On failure every rank throws the same error, so a
/// multi-rank start fails with the real reason on each rank rather than with rank 0's peers
/// reporting a closed connection. Returns rank 0's report (empty on other ranks).
InitReport load_init_weights_on_rank0(const InitWeights* init, Backend& backend, Communicator& comm,
                                      const Model& model);

}  // namespace kiln::train
