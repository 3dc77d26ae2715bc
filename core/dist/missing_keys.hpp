// The timeout message shared by every store: which keys are missing and, for rendezvous keys
// named "<prefix>/rank<N>", which ranks did not arrive ("waiting for ranks 3, 5 of 8").
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace kiln::dist::detail {

/// "rendezvous timed out after 30 s waiting for ranks 3, 5 of 8 (missing keys: gloo/rank3,
/// gloo/rank5 in <where>); check that every rank was started and uses the same store".
/// `world_size` 0 leaves out "of <W>"; keys that do not name a rank are listed only as keys.
std::string timeout_message(const std::vector<std::string>& missing, std::chrono::milliseconds timeout,
                            int world_size, const std::string& where);

/// Rank N if `key` ends in "rank<N>" (after a '/' or at the start), else -1.
int rank_of_key(const std::string& key);

}  // namespace kiln::dist::detail
