// What a path is when it is not a regular file, for the readers that must not open anything
// else: a named pipe blocks the open until something writes to it, a directory fails the first
// read with a stream exception that names no file, and a device such as /dev/zero never ends.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::io {

/// "" for a regular file (or a link to one) and for a path that does not exist (the caller's
/// open reports that); else "a directory", "a FIFO (named pipe)", "a socket", "a device" or
/// "not a regular file".
std::string not_a_regular_file(const std::filesystem::path& path);

/// The whole content of the regular file `path`. Throws DataError "<path> is a directory, not a
/// file" for anything else, IoError "cannot open <path>: <reason>" and DataError "cannot read
/// <path>: <reason>" (an I/O error of a failing disk).
std::string read_regular_file(const std::filesystem::path& path);

}  // namespace kiln::io
