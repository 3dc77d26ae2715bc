// make_store: the store spec of a run ("file:<dir>", "memory") to a Store (see stores.hpp).
#include <fmt/format.h>

#include "kiln/dist/file_store.hpp"
#include "kiln/dist/memory_store.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/errors.hpp"

namespace kiln::dist {

std::unique_ptr<Store> make_store(const std::string& spec, const RankInfo& ranks) {
  constexpr std::string_view file_prefix = "file:";
  if (spec.starts_with(file_prefix)) {
    const std::string dir = spec.substr(file_prefix.size());
    if (dir.empty()) {
      throw ConfigError("store spec 'file:' names no directory; write file:<dir>, e.g. "
                        "file:/shared/run42/rendezvous");
    }
    return std::make_unique<FileStore>(dir, ranks.world_size);
  }
  if (spec == "memory") {
    if (ranks.world_size != 1) {
      throw ConfigError(fmt::format(
          "store 'memory' only works inside one process, but the world has {} ranks (from {}); "
          "use file:<dir> on a path every rank can reach",
          ranks.world_size, ranks.source));
    }
    return std::make_unique<MemoryStore>(ranks.world_size);
  }
  throw ConfigError(fmt::format("unknown rendezvous store '{}'; use file:<dir> (a directory every "
                                "rank can reach) or memory (world size 1)", spec));
}

}  // namespace kiln::dist
