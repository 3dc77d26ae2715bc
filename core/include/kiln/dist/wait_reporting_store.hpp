// A store that says, while it waits, which ranks it is still waiting for.
//
// Why: at the rendezvous a rank that was never started, or is stuck before it connects, keeps the
// others waiting in silence until dist.timeout_s (300 s by default) ends the job -- pain #20 in
// conventions.md ("the store barrier waits with no hint which rank is missing"). The stores already
// name the missing ranks when they give up; this wrapper names them every `report.every` before
// that, on every waiting rank's console:
//   rank 0 has waited 60 s at the rendezvous for rank 2 of 4 (missing keys: gloo/arrive/rank2 in
//   file store /tmp/rdzv); it gives up after 300 s (dist.timeout_s)
//
// It cuts a long get() or wait() into waits of `report.every` on the store it wraps, reporting
// after each one that ran out, and rethrows the last with the whole timeout in its message. Any
// other error passes through at once. run.cpp hands it to the ranks' agreement check and to the
// communicator's connect() ([dist] warn_after_s, 0 = off).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "kiln/dist/stores.hpp"
#include "kiln/store.hpp"

namespace kiln::dist {

class WaitReportingStore final : public Store {
 public:
  /// `inner` must be a store from make_store (its timeouts carry the missing keys) and outlive
  /// this one; `rank` names this rank in the reports.
  WaitReportingStore(Store& inner, WaitReport report, int rank);

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override;
  std::vector<std::uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;

 private:
  template <class Call>
  auto in_slices(std::chrono::milliseconds timeout, Call call);

  Store& inner_;
  WaitReport report_;
  int rank_;
};

}  // namespace kiln::dist
