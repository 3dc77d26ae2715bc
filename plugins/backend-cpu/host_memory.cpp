// Reading the host's available memory (see host_memory.hpp).
#include "host_memory.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace kiln::cpu {
namespace {

/// A "Key:   N kB" line of /proc/meminfo, in bytes.
std::optional<std::uint64_t> meminfo_bytes(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    std::uint64_t kb = 0;
    if (fields >> kb) return kb * 1024;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> read_number(const std::string& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (...) {
    return std::nullopt;
  }
}

/// The cgroup's remaining allowance, if this process runs under a memory limit.
std::optional<std::uint64_t> cgroup_room() {
  for (const auto& [limit_file, usage_file] :
       {std::pair<const char*, const char*>{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const auto limit = read_number(limit_file);
    const auto usage = read_number(usage_file);
    // v1 reports "no limit" as a huge number near 2^63.
    if (limit && usage && *limit < (std::uint64_t{1} << 62)) return *limit > *usage ? *limit - *usage : 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<HostMemory> available_host_memory() {
  std::ifstream in("/proc/meminfo");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::optional<HostMemory> out;
  if (const auto avail = meminfo_bytes(text, "MemAvailable")) {
    out = HostMemory{*avail + meminfo_bytes(text, "SwapFree").value_or(0), "MemAvailable + SwapFree"};
  }
  if (const auto room = cgroup_room(); room && (!out || *room < out->bytes)) {
    out = HostMemory{*room, "the cgroup's memory limit less its usage"};
  }
  return out;
}

}  // namespace kiln::cpu
