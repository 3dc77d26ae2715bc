// Anchoring relative path parameters (see paths.hpp).
#include "paths.hpp"

namespace kiln::config {
namespace fs = std::filesystem;

std::string anchor_path(const std::string& value, const fs::path& base) {
  if (value.empty()) return value;
  const fs::path p(value);
  if (p.is_absolute()) return value;
  return (base / p).lexically_normal().string();
}

fs::path config_dir(const std::string& source) {
  return fs::absolute(fs::path(source)).parent_path();
}

}  // namespace kiln::config
