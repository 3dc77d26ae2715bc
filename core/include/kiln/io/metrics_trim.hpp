// Resuming without duplicated metrics: a run that died after its last checkpoint had already
// appended metrics.jsonl records for the epochs after it; the resumed run trains those epochs
// again and writes them anew. Those stale records are dropped before it does, so every epoch
// appears exactly once (the records of the epochs actually kept in the weights).
#pragma once

#include <cstdint>
#include <filesystem>

namespace kiln::io {

/// Rewrites `path` (temporary file + rename, so a crash leaves the old or the new file, never a
/// mix) without the records whose "epoch" is greater than `epochs_done`. Lines that are not such
/// records are kept, except a last line without its newline: a record torn by the crash. A
/// missing file is left missing. Returns how many lines were dropped. Throws IoError.
std::int64_t drop_metrics_after_epoch(const std::filesystem::path& path, std::int64_t epochs_done);

}  // namespace kiln::io
