// Rendezvous stores (interfaces/kiln/store.hpp) the core provides to communicators.
//
//   MemoryStore  in-process, for tests that run one thread per rank
//   FileStore    a directory on a (shared) filesystem: each key is a file written atomically
//                (temp + rename); get/wait poll with a short back-off until the timeout
//   TcpStore     served over TCP by rank 0 (tcp_store.hpp), no shared filesystem needed
//   make_store   "tcp://host:port" -> TcpStore (rank 0 serves on port); "mpi" -> TcpStore on a
//                free port whose address rank 0 sends with MPI_Bcast; "file:<dir>" -> FileStore;
//                "memory" -> a MemoryStore (world size 1 only)
// Timeouts name the missing keys, and for rendezvous keys named after ranks
// ("<prefix>/rank<N>") the missing ranks, so a hang becomes "waiting for ranks {3, 5} of 8".
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "kiln/communicator.hpp"
#include "kiln/store.hpp"

namespace kiln::dist {

class MemoryStore;  // defined in memory_store.hpp
class FileStore;    // defined in file_store.hpp

/// How a long wait reports while it goes on ([dist] warn_after_s): `say` is called every `every`
/// with what is still awaited. `every` 0 (or no `say`): silent until the timeout's error.
struct WaitReport {
  std::chrono::milliseconds every{0};
  std::function<void(const std::string&)> say;
  std::string timeout_from = "dist.timeout_s";  ///< what sets the timeout, named in the reports
  bool on() const { return every.count() > 0 && say; }
};

/// Creates the store described by `spec` ("tcp://host:port", "mpi", "file:<dir>", "memory").
/// `timeout` bounds how long a TCP client keeps trying to reach rank 0's server, and `report`
/// says while it tries. Throws ConfigError for an unknown or malformed spec, IoError if the
/// directory cannot be created, CommError if rank 0 cannot open its server or MPI fails.
std::unique_ptr<Store> make_store(const std::string& spec, const RankInfo& ranks,
                                  std::chrono::milliseconds timeout = std::chrono::minutes(5),
                                  const WaitReport& report = {});

/// Where a store made by make_store lives, for the banner: "tcp://10.0.0.1:41234" (the real
/// port and rank 0's first address, also for "mpi"), "file:<dir>" or "memory".
std::string describe_store(const Store& store);

}  // namespace kiln::dist
