// Run identities: their text form and comparison (see the header).
#include "kiln/train/run_identity.hpp"

#include <fmt/format.h>

#include <set>

namespace kiln::train {
namespace {

template <class T>
std::string scalar_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
  else return fmt::format("{}", v);
}

}  // namespace

std::string param_text(const ParamValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<double>> ||
                      std::is_same_v<T, std::vector<std::string>>) {
          std::string out = "[";
          for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + scalar_text(v[i]);
          return out + "]";
        } else {
          return scalar_text(v);
        }
      },
      value);
}

void add_params(RunIdentity& id, const std::string& prefix, const ParamMap& table) {
  for (const auto& [key, p] : table.entries()) id[prefix + "." + key] = param_text(p.value);
}

std::vector<std::string> identity_differences(const RunIdentity& checkpoint, const RunIdentity& current) {
  std::set<std::string> keys;
  for (const auto& [k, v] : checkpoint) keys.insert(k);
  for (const auto& [k, v] : current) keys.insert(k);
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const auto a = checkpoint.find(k), b = current.find(k);
    const std::string was = a == checkpoint.end() ? "none" : a->second;
    const std::string now = b == current.end() ? "none" : b->second;
    if (was != now) out.push_back(fmt::format("checkpoint was written with {} = {}, this run has {}", k, was, now));
  }
  return out;
}

}  // namespace kiln::train
