// FileStore: a rendezvous store in a directory on a (shared) filesystem.
//
// Each key is one file, written to a temporary name and renamed into place, so a reader sees
// either nothing or the whole value. Key names are percent-encoded into file names ('/' and
// anything outside [A-Za-z0-9._-]). get()/wait() poll with a back-off from 1 ms to 50 ms until
// the timeout. add() holds an flock on "<file>.lock" around read-modify-rename, so it is atomic
// across processes (and threads: each call opens its own descriptor). The directory must be
// fresh for each run: keys left by an earlier run would be seen as already present.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/store.hpp"

namespace kiln::dist {

class FileStore final : public Store {
 public:
  /// Creates `dir` if needed (IoError if it cannot). `world_size` (0 = unknown) only makes
  /// timeout messages say "of <W>".
  explicit FileStore(std::filesystem::path dir, int world_size = 0);

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

  const std::filesystem::path& directory() const noexcept { return dir_; }
  /// The file that holds `key`.
  std::filesystem::path path_of(const std::string& key) const;

 private:
  void write_atomically(const std::filesystem::path& target, const std::vector<std::uint8_t>& value);

  std::filesystem::path dir_;
  int world_size_;
};

}  // namespace kiln::dist
