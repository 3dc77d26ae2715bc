// The IPv4 addresses of this host, for telling other hosts where rank 0's store listens.
#pragma once

#include <string>
#include <vector>

namespace kiln::dist::detail {

/// Dotted quads of every interface that is up: the non-loopback ones first (in interface
/// order), then 127.0.0.1, so a client on another host tries a reachable address first and
/// one on this host still finds it. Never empty.
std::vector<std::string> local_ipv4_addresses();

}  // namespace kiln::dist::detail
