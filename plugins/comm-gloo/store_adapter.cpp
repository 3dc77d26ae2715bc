// StoreAdapter: kiln::Store behind Gloo's rendezvous interface (see store_adapter.hpp).
#include "store_adapter.hpp"

#include <algorithm>
#include <cctype>

namespace kiln::gloo_comm {

StoreAdapter::StoreAdapter(kiln::Store& store, std::string prefix, std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

std::string StoreAdapter::translate(const std::string& key) const {
  const bool is_rank = !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isdigit(c) != 0;
  });
  return prefix_ + (is_rank ? "/rank" : "/") + key;
}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_.set(translate(key), std::vector<std::uint8_t>(data.begin(), data.end()));
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  const auto value = store_.get(translate(key), timeout_);
  return {value.begin(), value.end()};
}

void StoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void StoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> translated;
  translated.reserve(keys.size());
  for (const auto& key : keys) translated.push_back(translate(key));
  store_.wait(translated, timeout);
}

}  // namespace kiln::gloo_comm
