// FileStore: a rendezvous store in a directory on a (shared) filesystem.
//
// Each key is one file, written to a temporary name and renamed into place, so a reader sees
// either nothing or the whole value. Key names are percent-encoded into file names ('/' and
// anything outside [A-Za-z0-9._-]). get()/wait() poll with a back-off from 1 ms to 50 ms until
// the timeout. add() holds an flock on "<file>.lock" around read-modify-rename, so it is atomic
// across processes (and threads: each call opens its own descriptor). Keys left by an earlier
// run would be seen as already present: a run empties the directory once its ranks have
// connected (forget_rendezvous_keys(), stores.hpp), and refuses one with its own key in it.
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
  /// Removes every key (and add()'s lock files) from the directory, leaving the directory and
  /// any file that is not the store's; returns how many files went. Only when no rank uses the
  /// store any more.
  std::size_t remove_keys();
  /// Removes the files of `keys` (those present); returns how many went.
  std::size_t remove_keys(const std::vector<std::string>& keys);

 private:
  void write_atomically(const std::filesystem::path& target, const std::vector<std::uint8_t>& value);

  std::filesystem::path dir_;
  int world_size_;
};

}  // namespace kiln::dist
