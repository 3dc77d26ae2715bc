// Which build of a loaded library this process runs: the GNU build id the linker writes into
// every ELF file it links (a hash of the file's contents), read from the mapped image, so it
// costs no file I/O. The multi-rank agreement check (kiln/train/rank_agreement.hpp) compares
// these between ranks to spot a node that loads a different build of the same plugin.
#pragma once

#include <filesystem>
#include <string>

namespace kiln::plugin {

/// The build id of the loaded library whose file is `library` (as lowercase hex), else
/// "crc32c:<8 hex digits>" of the file's contents when the linker wrote no build id. Throws
/// IoError when the file cannot be read for the fallback.
std::string build_id_of(const std::filesystem::path& library);

/// The same for the library (or executable) holding the core's code.
std::string core_build_id();

/// The file `library` names with its symbolic links resolved, or `library` when that fails.
std::filesystem::path resolved_path(const std::filesystem::path& library);

}  // namespace kiln::plugin
