// MemoryStore: map + mutex + condition variable (see kiln/dist/memory_store.hpp).
#include "kiln/dist/memory_store.hpp"

#include "counter_value.hpp"
#include "kiln/errors.hpp"
#include "missing_keys.hpp"

namespace kiln::dist {

MemoryStore::MemoryStore(int world_size) : world_size_(world_size) {}

void MemoryStore::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  {
    std::lock_guard lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

std::vector<std::uint8_t> MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  std::lock_guard lock(mutex_);
  return values_.at(key);
}

std::int64_t MemoryStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t value = 0;
  {
    std::lock_guard lock(mutex_);
    auto& bytes = values_[key];
    value = detail::parse_counter(bytes, key, "the in-memory store") + delta;
    bytes = detail::format_counter(value);
  }
  changed_.notify_all();
  return value;
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mutex_);
  const auto all_present = [&] {
    for (const auto& key : keys) {
      if (!values_.contains(key)) return false;
    }
    return true;
  };
  if (changed_.wait_until(lock, deadline, all_present)) return;
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!values_.contains(key)) missing.push_back(key);
  }
  throw detail::StoreTimeout(missing, timeout, world_size_, "the in-memory store");
}

}  // namespace kiln::dist
