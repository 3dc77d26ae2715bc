// MemoryStore: an in-process rendezvous store (a map guarded by a mutex and a condition
// variable), for tests that run one thread per rank and for world size 1.
//
// Values written by add() are stored as decimal text, as in FileStore, so get() of a counter
// reads the same on both. Timeouts throw CommError naming the missing keys and ranks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/store.hpp"

namespace kiln::dist {

class MemoryStore final : public Store {
 public:
  /// `world_size` (0 = unknown) only makes timeout messages say "of <W>".
  explicit MemoryStore(int world_size = 0);

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  int world_size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<std::uint8_t>> values_;
};

}  // namespace kiln::dist
