// Resuming without duplicated metrics: a run that died after its last checkpoint had already
// appended metrics.jsonl records for the epochs after it; the resumed run trains those epochs
// again and writes them anew. Those stale records are dropped before it does, so every epoch
// and every step record appears exactly once (the records of the steps actually kept in the
// weights).
#pragma once

#include <cstdint>
#include <filesystem>

namespace kiln::io {

/// Rewrites `path` (temporary file + rename, so a crash leaves the old or the new file, never a
/// mix) without the records written after a checkpoint taken at `epochs_done` epochs and
/// `steps_done` optimizer steps: a record with a whole-number "step" (every record Kiln writes:
/// epoch records carry the step count at the epoch's end, step records their own) is dropped when
/// that step is greater than `steps_done`, one with only an "epoch" when it is greater than
/// `epochs_done`. Lines that are neither are kept, except a last line without its newline: a
/// record torn by the crash. A missing file is left missing. Returns how many lines were
/// dropped. Throws IoError.
std::int64_t drop_metrics_after(const std::filesystem::path& path, std::int64_t epochs_done, std::int64_t steps_done);

}  // namespace kiln::io
