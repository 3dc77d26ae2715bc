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
#include <exception>
#include <mutex>
#include <string>
#include <vector>

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

// One rendezvous directory for run after run (store_reuse.cpp). A TCP store lives and dies with
// its run, but a `file:` directory keeps its keys: the next run would find an earlier run's
// addresses there and wait on ranks long gone ("Connect timeout ... a peer may have died").

/// Throws ConfigError when `key`, which only this rank writes and once per run, is already in
/// `store`: the store holds keys of an earlier run (a `file:` directory left by a run that
/// stopped during its rendezvous), or another process was started as this rank. `where` names
/// the store in the message (describe_store()).
void refuse_earlier_keys(Store& store, const std::string& key, const RankInfo& ranks, const std::string& where);

/// Once every rank has connected (after a barrier on the communicator, so nobody reads the
/// store again), rank 0 calls this: a FileStore's directory is emptied of its keys, so the next
/// run can use it; other stores keep nothing between runs. Returns the files removed; one it
/// cannot remove is left (the next run's refuse_earlier_keys() then says what to do).
std::size_t forget_rendezvous_keys(Store& store);

/// Removes `keys` from a FileStore (nothing from other stores); returns how many files went.
std::size_t forget_keys(Store& store, const std::vector<std::string>& keys);

/// The store a start hands to the agreement check and the communicator: it passes every call to
/// `inner` and remembers the keys this rank sets. Destroyed by an exception -- a start that failed
/// before its ranks were past the store, which fails for all of them -- it removes keys from
/// `backing` (the store under `inner`) so the next run does not trip on them:
/// - rank 0 (`everything`): every key, what an earlier run left included; it has waited for the
///   others to read what it published (rank_agreement.cpp);
/// - another rank: its own keys, and only if it gave up waiting (a timeout of this store): the
///   rank it waited for is not coming. After any other failure (a verdict of disagreement) the
///   other ranks may still be waiting for its keys, so they are left to rank 0.
/// dismiss() once the ranks are past the store.
class CleanOnFailureStore final : public Store {
 public:
  CleanOnFailureStore(Store& inner, Store& backing, bool everything);
  ~CleanOnFailureStore() override;
  CleanOnFailureStore(const CleanOnFailureStore&) = delete;
  CleanOnFailureStore& operator=(const CleanOnFailureStore&) = delete;
  void dismiss() noexcept { dismissed_ = true; }

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  Store& inner_;
  Store& backing_;
  bool everything_;
  bool dismissed_ = false;
  bool gave_up_waiting_ = false;
  int uncaught_;
  std::mutex mutex_;  // a communicator may set keys from several threads
  std::vector<std::string> own_keys_;
};

}  // namespace kiln::dist
