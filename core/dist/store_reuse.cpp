// One rendezvous directory for run after run: refuse_earlier_keys, forget_rendezvous_keys,
// forget_keys and CleanOnFailureStore (stores.hpp says why).
#include <fmt/format.h>

#include "kiln/dist/file_store.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/errors.hpp"
#include "missing_keys.hpp"

namespace kiln::dist {
namespace {

/// Whether `key` is in `store` now (a wait that gives up at once).
bool holds(Store& store, const std::string& key) {
  try {
    store.wait({key}, std::chrono::milliseconds(0));
    return true;
  } catch (const detail::StoreTimeout&) {
    return false;
  }
}

}  // namespace

void refuse_earlier_keys(Store& store, const std::string& key, const RankInfo& ranks, const std::string& where) {
  if (!holds(store, key)) return;
  const bool directory = where.starts_with("file:");
  throw ConfigError(fmt::format(
      "rank {} of {}: the rendezvous store {} already holds '{}', which only rank {} writes, once per run: {}, or "
      "another process of this run was also started as rank {}. {}",
      ranks.rank, ranks.world_size, where, key, ranks.rank,
      directory ? "an earlier run left it there (a run empties the directory once its ranks have connected, so that "
                  "one stopped during its rendezvous)"
                : "an earlier run left it there",
      ranks.rank,
      directory ? fmt::format("Empty the directory (rm {}/k_*) once no run uses it, or give this run another one "
                              "(dist.rendezvous or KILN_RENDEZVOUS = file:<new dir>); nothing was written",
                              where.substr(5))
                : "Start the ranks again with a fresh store; nothing was written"));
}

std::size_t forget_rendezvous_keys(Store& store) {
  if (auto* file = dynamic_cast<FileStore*>(&store)) return file->remove_keys();
  return 0;
}

std::size_t forget_keys(Store& store, const std::vector<std::string>& keys) {
  if (auto* file = dynamic_cast<FileStore*>(&store)) return file->remove_keys(keys);
  return 0;
}

CleanOnFailureStore::CleanOnFailureStore(Store& inner, Store& backing, bool everything)
    : inner_(inner), backing_(backing), everything_(everything), uncaught_(std::uncaught_exceptions()) {}

CleanOnFailureStore::~CleanOnFailureStore() {
  if (dismissed_ || std::uncaught_exceptions() <= uncaught_) return;
  try {
    if (everything_) {
      forget_rendezvous_keys(backing_);
    } else if (gave_up_waiting_) {
      forget_keys(backing_, own_keys_);
    }
  } catch (...) {  // the start's own error is the one to report
  }
}

void CleanOnFailureStore::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  inner_.set(key, value);
  const std::lock_guard lock(mutex_);
  own_keys_.push_back(key);
}

std::vector<std::uint8_t> CleanOnFailureStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  try {
    return inner_.get(key, timeout);
  } catch (const detail::StoreTimeout&) {
    gave_up_waiting_ = gave_up_waiting_ || timeout.count() > 0;  // a zero wait only looks
    throw;
  }
}

std::int64_t CleanOnFailureStore::add(const std::string& key, std::int64_t delta) {
  // A counter is shared by the ranks: only rank 0's clean-up removes it.
  return inner_.add(key, delta);
}

void CleanOnFailureStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  try {
    inner_.wait(keys, timeout);
  } catch (const detail::StoreTimeout&) {
    gave_up_waiting_ = gave_up_waiting_ || timeout.count() > 0;  // a zero wait only looks
    throw;
  }
}

}  // namespace kiln::dist
