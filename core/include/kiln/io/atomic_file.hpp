// Files that are either whole or absent, also after a full disk or a power cut.
//
// write_file_atomic writes a temp file next to the target ("<path>.tmp"), syncs it to disk,
// renames it over the target and syncs the directory, so a reader (or a resumed run) sees the old
// file or the new one, never a torn one. A failed write (ENOSPC, EDQUOT, EIO, EFBIG) removes the
// temp file, which frees the space it took, leaves the target as it was, and throws an IoError
// naming the file, the reason and how far it got:
//   cannot write runs/x/checkpoints/.partial-epoch-0002/trainer.safetensors.tmp: No space left on
//   device (262144 of 815104 bytes written); the file it replaces is unchanged
#pragma once

#include <filesystem>
#include <string>

namespace kiln::io {

/// Writes `contents` to `path` atomically and durably (temp file, fsync, rename, directory
/// fsync). Throws IoError; on failure `path` is unchanged and no temp file is left.
void write_file_atomic(const std::filesystem::path& path, const std::string& contents);

/// fsync()s a directory, making the renames and new entries in it durable. Throws IoError, except
/// where the file system cannot sync directories (EINVAL), where it does nothing.
void sync_directory(const std::filesystem::path& dir);

}  // namespace kiln::io
