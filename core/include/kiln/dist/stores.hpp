// Rendezvous stores (interfaces/kiln/store.hpp) the core provides to communicators.
//
//   MemoryStore  in-process, for tests that run one thread per rank
//   FileStore    a directory on a (shared) filesystem: each key is a file written atomically
//                (temp + rename); get/wait poll with a short back-off until the timeout
//   make_store   "file:<dir>" -> FileStore; "memory" -> a MemoryStore (world size 1 only)
// Timeouts name the missing keys, and for rendezvous keys named after ranks
// ("<prefix>/rank<N>") the missing ranks, so a hang becomes "waiting for ranks {3, 5} of 8".
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "kiln/communicator.hpp"
#include "kiln/store.hpp"

namespace kiln::dist {

class MemoryStore;  // defined in memory_store.hpp
class FileStore;    // defined in file_store.hpp

/// Creates the store described by `spec` ("file:<dir>", "memory"). Throws ConfigError for an
/// unknown spec, IoError if the directory cannot be created.
std::unique_ptr<Store> make_store(const std::string& spec, const RankInfo& ranks);

}  // namespace kiln::dist
