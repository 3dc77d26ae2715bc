// DataSource: a random-access sample reader (plugins `mnist`, `imagenet`).
//
// A plugin author writes only this: describe the samples and decode/augment one sample into a
// caller-owned buffer. The core DataLoader owns sharding across ranks, per-epoch shuffling, the
// last-batch policy, worker threads and prefetching. Which split a source reads (train/test) is
// one of its own parameters: a run makes one instance per [data.*] table.
//
// Thread-safety: read() is called concurrently from several worker threads and must be safe
// for that (read-only shared state, per-call scratch). describe() is cheap and const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.hpp"

namespace kiln {

/// What a source produces. Fixed for the life of the source.
struct DatasetInfo {
  Shape sample_shape;       ///< per sample: {784}, {3, 224, 224}
  DType sample_dtype = DType::f32;
  std::int64_t num_classes = 0;
  std::int64_t count = 0;   ///< number of samples; valid indices are [0, count)
  std::string description;  ///< for the banner: "Fashion-MNIST train (60000 from /usr/share/...)"
  /// What each class is called, where the source knows: class_names[i] names label i ("Coat",
  /// an ImageFolder directory "n01440764"). Empty = unknown. At most num_classes entries (classes
  /// past the end are unnamed); each non-empty, without control characters. The core records
  /// them in checkpoints, refuses an eval split or a resumed run that numbers the classes
  /// differently, and `kiln predict` writes them next to the indices.
  std::vector<std::string> class_names;
  /// False for samples without labels (a folder of images to predict on): read() writes label 0,
  /// num_classes is 0 and class_names empty. Only `kiln predict` reads such a source (it writes
  /// no label columns); `kiln train` and `kiln eval` refuse it.
  bool labeled = true;
};

/// Where read() writes one sample: `bytes` bytes at `data` (sample_shape x sample_dtype,
/// row-major) and its class label.
struct SampleSlot {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::int32_t* label = nullptr;
};

class DataSource {
 public:
  virtual ~DataSource();
  /// Plugin name ("mnist").
  virtual std::string_view name() const = 0;
  virtual DatasetInfo describe() const = 0;
  /// Decodes (and, for training sources, augments) sample `index` into `out`. `seed` is derived
  /// by the loader from (run seed, epoch, index): all randomness must come from it (use
  /// kiln::SampleRng) so results do not depend on worker count. Throws DataError naming the file
  /// and index for bad data.
  virtual void read(std::int64_t index, std::uint64_t seed, const SampleSlot& out) const = 0;
  /// Running totals the source wants reported, e.g. {"skipped_samples": 3} for a reader that
  /// replaces bad samples; the trainer writes each into metrics.jsonl as "data_<name>" at every
  /// epoch end. Called from the trainer thread while workers read: must be thread-safe.
  /// Default: none.
  virtual std::map<std::string, double> counters() const;
  /// What a user calls sample `index` in [0, count), for `kiln predict`'s output: an image's path
  /// under the dataset root, a record's shard and position. The same for every call; called from
  /// one thread at a time. Default: "" (the source has no names: the index is the id).
  virtual std::string sample_id(std::int64_t index) const;
};

}  // namespace kiln
