// The launcher's implied rendezvous (rules in kiln/dist/launcher_rendezvous.hpp).
#include "kiln/dist/launcher_rendezvous.hpp"

#include <fmt/format.h>

#include <charconv>

#include "kiln/errors.hpp"

namespace kiln::dist {

std::optional<RendezvousChoice> launcher_rendezvous(const RankInfo& ranks, const launch::EnvLookup& env) {
  if (ranks.world_size <= 1 || ranks.source == "command line") return std::nullopt;
  const launch::Launcher launcher = launch::detect_launcher({}, env);
  if (launcher == launch::Launcher::openmpi) {
    return RendezvousChoice{"mpi", "Open MPI: rank 0's store address sent with MPI_Bcast"};
  }
  if (launcher != launch::Launcher::torchrun && launcher != launch::Launcher::environment) return std::nullopt;
  const auto addr = env("MASTER_ADDR");
  const auto port_text = env("MASTER_PORT");
  if (!addr || addr->empty() || !port_text) return std::nullopt;
  int port = 0;
  const auto r = std::from_chars(port_text->data(), port_text->data() + port_text->size(), port);
  if (r.ec != std::errc() || r.ptr != port_text->data() + port_text->size() || port < 1 || port > 65535) {
    throw ConfigError(fmt::format("environment variable MASTER_PORT='{}' is not a port number (1..65535)", *port_text));
  }
  const auto agent_store = env("TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store && *agent_store == "True") {
    if (port == 65535) {
      throw ConfigError("MASTER_PORT=65535 leaves no port for Kiln's store next to torchrun's agent store "
                        "(Kiln uses MASTER_PORT + 1); pass a lower --master-port");
    }
    return RendezvousChoice{fmt::format("tcp://{}:{}", *addr, port + 1),
                            "MASTER_ADDR and MASTER_PORT + 1: torchrun's agent store holds MASTER_PORT"};
  }
  return RendezvousChoice{fmt::format("tcp://{}:{}", *addr, port), "MASTER_ADDR and MASTER_PORT"};
}

}  // namespace kiln::dist
