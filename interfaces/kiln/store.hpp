// Store: the key-value rendezvous communicators use to find each other (Gloo's design:
// rendezvous separate from transport). Implementations: an in-memory store for tests (one
// thread per rank), a file store on a shared path, an MPI-backed store under mpirun.
//
// Thread-safety: all methods may be called concurrently. Errors: CommError on timeout, naming
// the keys still missing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class Store {
 public:
  virtual ~Store();
  /// Sets `key` (overwrites).
  virtual void set(const std::string& key, const std::vector<std::uint8_t>& value) = 0;
  /// Waits up to `timeout` for `key`, then returns its value.
  virtual std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Atomically adds `delta` to the integer at `key` (0 if absent) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Waits up to `timeout` until every key exists; the CommError lists the missing ones.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
};

}  // namespace kiln
