// See option_args.hpp.
#include "option_args.hpp"

namespace kiln::cli {

std::vector<std::string> without_option(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  const std::string flag = "--" + name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++i;  // and its value
    } else if (args[i].rfind(flag + "=", 0) != 0) {
      out.push_back(args[i]);
    }
  }
  return out;
}

}  // namespace kiln::cli
