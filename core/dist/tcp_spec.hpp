// Parsing "tcp://host:port" rendezvous specs.
#pragma once

#include <string>

namespace kiln::dist::detail {

struct TcpEndpoint {
  std::string host;  ///< a name or dotted quad, as written
  int port = 0;      ///< 1..65535
};

/// Splits "tcp://host:port" (the prefix already recognised). Throws ConfigError naming the spec
/// and what is wrong: no host, no port, a port that is not a number in 1..65535, or brackets
/// (IPv6 is not supported).
TcpEndpoint parse_tcp_spec(const std::string& spec);

}  // namespace kiln::dist::detail
