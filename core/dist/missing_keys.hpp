// The timeout message shared by every store: which keys are missing and, for rendezvous keys
// named "<prefix>/rank<N>", which ranks did not arrive ("waiting for ranks 3, 5 of 8").
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kiln/errors.hpp"

namespace kiln::dist::detail {

/// "rendezvous timed out after 30 s waiting for ranks 3, 5 of 8 (missing keys: gloo/rank3,
/// gloo/rank5 in <where>); check that every rank was started and uses the same store".
/// `world_size` 0 leaves out "of <W>"; keys that do not name a rank are listed only as keys.
std::string timeout_message(const std::vector<std::string>& missing, std::chrono::milliseconds timeout,
                            int world_size, const std::string& where);

/// Rank N if `key` ends in "rank<N>" (after a '/' or at the start), else -1.
int rank_of_key(const std::string& key);

/// "rank 2 of 4", "ranks 3, 5 of 8", or "2 keys" when no key names a rank.
std::string waited_for(const std::vector<std::string>& missing, int world_size);

/// "12 s", "0.5 s".
std::string format_duration(std::chrono::milliseconds d);

/// What every store throws when a get or wait runs out of time (its what() is timeout_message):
/// WaitReportingStore (kiln/dist/wait_reporting_store.hpp) reads the missing keys from it.
class StoreTimeout : public CommError {
 public:
  StoreTimeout(std::vector<std::string> missing, std::chrono::milliseconds timeout, int world_size,
               std::string where);
  const std::vector<std::string>& missing() const noexcept { return missing_; }
  int world_size() const noexcept { return world_size_; }
  const std::string& where() const noexcept { return where_; }

 private:
  std::vector<std::string> missing_;
  int world_size_;
  std::string where_;
};

}  // namespace kiln::dist::detail
