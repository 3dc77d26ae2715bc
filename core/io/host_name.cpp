// host_name (see host_name.hpp).
#include "kiln/io/host_name.hpp"

#include <unistd.h>

namespace kiln::io {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace kiln::io
