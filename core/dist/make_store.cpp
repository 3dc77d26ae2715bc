// make_store: the store spec of a run ("tcp://host:port", "mpi", "file:<dir>", "memory") to a
// Store (see stores.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>

#include "kiln/dist/file_store.hpp"
#include "kiln/dist/memory_store.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/dist/tcp_store.hpp"
#include "kiln/errors.hpp"
#include "local_addresses.hpp"
#include "mpi_broadcast.hpp"
#include "tcp_spec.hpp"

namespace kiln::dist {
namespace {

std::unique_ptr<Store> make_tcp_store(const std::string& spec, const RankInfo& ranks, std::chrono::milliseconds timeout,
                                      const WaitReport& report) {
  const detail::TcpEndpoint e = detail::parse_tcp_spec(spec);
  TcpStoreOptions o;
  o.hosts = {e.host};
  o.port = e.port;
  o.rank = ranks.rank;
  o.world_size = ranks.world_size;
  o.serve = ranks.rank == 0;
  o.connect_timeout = timeout;
  o.connect_report = report;
  return std::make_unique<TcpStore>(std::move(o));
}

/// Rank 0 opens a TCP store on a free port and broadcasts "<port> <address>,<address>,..." (or
/// "error <message>" if it could not, so no rank waits for a store that will never exist).
std::unique_ptr<Store> make_mpi_store(const RankInfo& ranks, std::chrono::milliseconds timeout,
                                      const WaitReport& report) {
  TcpStoreOptions o;
  o.rank = ranks.rank;
  o.world_size = ranks.world_size;
  o.connect_timeout = timeout;
  o.connect_report = report;
  std::unique_ptr<TcpStore> store;
  std::string announcement;
  std::string failure;
  if (ranks.rank == 0) {
    o.hosts = detail::local_ipv4_addresses();
    o.serve = true;
    o.port = 0;
    try {
      store = std::make_unique<TcpStore>(o);
      announcement = fmt::format("{} {}", store->port(), fmt::join(o.hosts, ","));
    } catch (const Error& e) {
      failure = e.what();
      announcement = "error " + failure;
    }
  }
  const std::string got = detail::mpi_broadcast_from_rank0(announcement, ranks);
  if (ranks.rank == 0) {
    if (!store) throw CommError(failure);
    return store;
  }
  if (got.starts_with("error ")) {
    throw CommError(fmt::format("rank {} of {}: rank 0 could not open the rendezvous store: {}", ranks.rank,
                                ranks.world_size, got.substr(6)));
  }
  const auto space = got.find(' ');
  const std::string port_text = got.substr(0, space);
  const auto r = std::from_chars(port_text.data(), port_text.data() + port_text.size(), o.port);
  if (space == std::string::npos || r.ec != std::errc() || o.port < 1 || o.port > 65535) {
    throw CommError(fmt::format("rank {}: the mpi rendezvous received '{}' from rank 0, not '<port> <addresses>'",
                                ranks.rank, got.substr(0, 200)));
  }
  for (std::size_t at = space + 1; at <= got.size();) {
    const auto comma = std::min(got.find(',', at), got.size());
    if (comma > at) o.hosts.push_back(got.substr(at, comma - at));
    at = comma + 1;
  }
  if (o.hosts.empty()) throw CommError(fmt::format("rank {}: rank 0 sent no address for its store", ranks.rank));
  return std::make_unique<TcpStore>(std::move(o));
}

}  // namespace

std::unique_ptr<Store> make_store(const std::string& spec, const RankInfo& ranks, std::chrono::milliseconds timeout,
                                  const WaitReport& report) {
  if (spec.starts_with("tcp://")) return make_tcp_store(spec, ranks, timeout, report);
  if (spec == "mpi") return make_mpi_store(ranks, timeout, report);
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
          "use tcp://<rank 0's host>:<port> or file:<dir> on a path every rank can reach",
          ranks.world_size, ranks.source));
    }
    return std::make_unique<MemoryStore>(ranks.world_size);
  }
  throw ConfigError(fmt::format("unknown rendezvous store '{}'; use tcp://<host>:<port> (served by rank 0), mpi "
                                "(under mpirun), file:<dir> (a directory every rank can reach) or memory (world "
                                "size 1)",
                                spec));
}

std::string describe_store(const Store& store) {
  if (const auto* tcp = dynamic_cast<const TcpStore*>(&store)) return tcp->endpoint();
  if (const auto* file = dynamic_cast<const FileStore*>(&store)) return "file:" + file->directory().string();
  return "memory";
}

}  // namespace kiln::dist
