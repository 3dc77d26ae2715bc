// "tcp://host:port" -> host and port (see tcp_spec.hpp).
#include "tcp_spec.hpp"

#include <fmt/format.h>

#include <charconv>

#include "kiln/errors.hpp"

namespace kiln::dist::detail {

TcpEndpoint parse_tcp_spec(const std::string& spec) {
  constexpr std::string_view prefix = "tcp://";
  const std::string rest = spec.starts_with(prefix) ? spec.substr(prefix.size()) : spec;
  const auto fail = [&](const std::string& why) {
    return ConfigError(fmt::format("rendezvous '{}': {}; write tcp://<host>:<port>, e.g. tcp://node01:29500 "
                                   "(rank 0 must run on that host)",
                                   spec, why));
  };
  if (rest.find('[') != std::string::npos) throw fail("IPv6 addresses are not supported, use a name or IPv4 address");
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) throw fail("no port");
  TcpEndpoint e;
  e.host = rest.substr(0, colon);
  if (e.host.empty()) throw fail("no host");
  const std::string port = rest.substr(colon + 1);
  const auto r = std::from_chars(port.data(), port.data() + port.size(), e.port);
  if (port.empty() || r.ec != std::errc() || r.ptr != port.data() + port.size() || e.port < 1 || e.port > 65535) {
    throw fail(fmt::format("port '{}' is not a number in 1..65535", port));
  }
  return e;
}

}  // namespace kiln::dist::detail
