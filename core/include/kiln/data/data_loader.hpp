// DataLoader: turns a DataSource into batches for one rank.
//
// Sharding (Sharder): each epoch, the sample order is a permutation of [0, count) drawn from
// (seed, epoch) (identity when shuffle is off), the same on every rank. Global step s of the
// epoch covers positions [s*W*B, (s+1)*W*B) of that order; rank r takes the B positions starting
// at s*W*B + r*B. So shards are disjoint, every rank runs the same number of steps, and the
// order changes every epoch without anyone calling set_epoch(). The last-batch policy decides
// what happens to the count % (W*B) remainder:
//   drop    - steps = floor(count / (W*B)); the remainder is skipped this epoch (it differs
//             per epoch because the order does).
//   pad     - steps = ceil(count / (W*B)); missing positions wrap around to the start of the
//             order; those rows are marked as padding (valid_rows < rows) so evaluation can
//             count every sample exactly once.
//   partial - steps = ceil(count / (W*B)); the last step's batches are short, possibly empty on
//             some ranks (they still run the step, so collectives stay matched).
//
// Pipeline: `workers` threads decode samples (DataSource::read) into batch buffers allocated by
// the backend in host memory (pinned where the backend has it), at most `prefetch` batches
// ahead; next() hands them out in order. A DataSource error in a worker is rethrown by next()
// in the trainer thread. Per-sample seeds come from (seed, epoch, index), so the data are the
// same for any number of workers. The staging ring holds prefetch + 1 batches: the one the
// caller holds (valid until its next call to next()) plus `prefetch` decoded ahead of it, so
// decoding overlaps the training step even with prefetch = 1. Nothing is allocated per batch.
//
// Uploads: Backend::to_device may only enqueue its copy (CUDA: cudaMemcpyAsync from the pinned
// slot) and return, so a batch's slot can still be read by the device after the caller has moved
// on. The caller passes an event recorded after its to_device calls to release_after(); the
// worker that next claims that slot waits for the event (outside the lock, so neither the
// trainer nor the other workers block) before writing a byte. A slot without an event is reused
// as soon as next() releases it, as before (host backends, where to_device is the identity).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/data_source.hpp"
#include "kiln/tensor.hpp"

namespace kiln::data {

enum class LastBatch : std::uint8_t { drop, pad, partial };
enum class Shuffle : std::uint8_t { no, yes };

/// "drop" | "pad" | "partial" -> LastBatch; throws ConfigError naming `where` otherwise.
LastBatch parse_last_batch(std::string_view text, std::string_view where);
/// The policy's config spelling: "drop" | "pad" | "partial".
std::string_view last_batch_name(LastBatch policy);

struct ShardOptions {
  std::int64_t count = 0;   ///< samples in the source
  std::int64_t batch = 1;   ///< per-rank batch B
  int rank = 0;
  int world_size = 1;
  LastBatch last_batch = LastBatch::drop;
  Shuffle shuffle = Shuffle::yes;
  std::uint64_t seed = 0;
};

/// The rows of one rank's batch at one step.
struct BatchIndices {
  std::vector<std::int64_t> indices;  ///< sample indices, padding rows last
  std::int64_t valid = 0;             ///< leading entries that are not padding
  std::int64_t global_rows = 0;       ///< rows summed over all ranks at this step
  std::int64_t global_valid = 0;      ///< valid rows summed over all ranks at this step
};

/// Pure, deterministic sharding arithmetic (no threads, no I/O).
class Sharder {
 public:
  /// Throws ConfigError for batch < 1, world_size < 1, rank out of range, or a drop policy that
  /// leaves zero steps (count < W*B), naming the numbers; DataError for count < 1.
  explicit Sharder(const ShardOptions& options);
  std::int64_t steps_per_epoch() const noexcept { return steps_; }
  /// This rank's batch at `step` (0 <= step < steps_per_epoch()) of `epoch`.
  BatchIndices batch(std::int64_t epoch, std::int64_t step) const;
  /// The sample order of `epoch` (positions -> sample index). With Shuffle::yes it is a
  /// Fisher-Yates shuffle whose swap at position i draws from derive_seed(seed, epoch, i, stream),
  /// so it is the same on every rank, thread count and platform.
  std::vector<std::int64_t> epoch_order(std::int64_t epoch) const;
  /// Like batch(), from an order already computed by epoch_order() (the loader computes each
  /// epoch's order once instead of once per step).
  BatchIndices batch_in_order(const std::vector<std::int64_t>& order, std::int64_t step) const;
  /// Rows summed over all ranks at `step` of any epoch (what batch().global_rows says, without
  /// computing an order): W*B, except the short last step of `partial`.
  std::int64_t global_rows(std::int64_t step) const;
  const ShardOptions& options() const noexcept { return options_; }

 private:
  ShardOptions options_;
  std::int64_t steps_ = 0;
};

/// One batch, owned by the loader until the next call to next().
struct Batch {
  Tensor inputs;   ///< (rows, sample_shape...) in the source's dtype, host memory
  Tensor labels;   ///< (rows) i32, host memory
  std::int64_t rows = 0;
  std::int64_t valid_rows = 0;
  std::int64_t global_rows = 0;
  std::int64_t global_valid = 0;
  std::int64_t epoch = 0;
  std::int64_t step = 0;
  double wait_seconds = 0;  ///< how long next() blocked waiting for this batch
};

struct LoaderOptions {
  ShardOptions shard;  ///< shard.count is ignored: the loader takes it from source->describe()
  int workers = 1;   ///< decode threads (>= 1)
  int prefetch = 4;  ///< batches decoded ahead (>= 1)
};

class DataLoader {
 public:
  /// `backend` provides staging memory (MemoryKind::host_pinned). Both pointers outlive the loader.
  DataLoader(std::shared_ptr<const DataSource> source, Backend* backend, const LoaderOptions& options);
  ~DataLoader();  ///< stops and joins the workers
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  std::int64_t steps_per_epoch() const noexcept;
  const DatasetInfo& info() const noexcept;
  /// Starts decoding `epoch` (abandoning any unfinished epoch) at `first_step`: the steps before
  /// it are skipped, as when a run resumes from a checkpoint written in the middle of an epoch.
  /// Throws Error when first_step is not in [0, steps_per_epoch()].
  void start_epoch(std::int64_t epoch, std::int64_t first_step = 0);
  /// The next batch of the current epoch, or nullopt after the last. Rethrows worker errors.
  std::optional<Batch> next();
  /// The batch last returned by next() may be read by device work until `event` completes
  /// (record it after the batch's to_device calls): its staging slot is not overwritten before
  /// event->synchronize() has returned, which a worker thread calls. Null: no constraint. An
  /// error from synchronize() is rethrown by a later next().
  void release_after(std::shared_ptr<Event> event);

  /// Totals since construction: samples decoded and the seconds workers spent in
  /// DataSource::read, summed over workers (samples / busy_seconds = one worker's throughput).
  struct Stats {
    std::int64_t samples = 0;
    double busy_seconds = 0;
  };
  Stats stats() const;
  int workers() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::data
