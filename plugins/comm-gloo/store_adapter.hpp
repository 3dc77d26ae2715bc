// StoreAdapter: presents a kiln::Store to Gloo's rendezvous as a gloo::rendezvous::Store.
//
// Gloo's full-mesh rendezvous names its keys after bare rank numbers ("3"); they are stored as
// "<prefix>/rank3" so that a timeout from any kiln store names the missing ranks, and other keys
// as "<prefix>/<key>". get() has no timeout in Gloo's interface, so the adapter applies the
// communicator's rendezvous timeout. kiln::CommError passes through Gloo unchanged.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "kiln/store.hpp"

namespace kiln::gloo_comm {

class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(kiln::Store& store, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  /// The kiln store key for a Gloo key.
  std::string translate(const std::string& key) const;

 private:
  kiln::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

}  // namespace kiln::gloo_comm
