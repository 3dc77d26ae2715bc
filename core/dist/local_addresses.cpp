// getifaddrs() -> this host's IPv4 addresses (see local_addresses.hpp).
#include "local_addresses.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>

namespace kiln::dist::detail {

std::vector<std::string> local_ipv4_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      if (!(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK)) continue;
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
    }
    ::freeifaddrs(list);
  }
  out.emplace_back("127.0.0.1");
  return out;
}

}  // namespace kiln::dist::detail
