// Where plugins are looked for, and the human names of plugin kinds.
//
// Order matters (first match wins): explicit --plugin-path dirs, then KILN_PLUGIN_PATH entries,
// (absolute only: a relative one is an error), then the install's plugin dir found from the
// running executable (bin/../<libdir>/kiln/plugins;
// the build tree mirrors this as build/lib/kiln/plugins). Missing directories are kept in the
// list (they show up in "searched: ..." messages) and skipped by scan().
#include <cstdlib>
#include <string>
#include <system_error>

#include "kiln/errors.hpp"
#include "kiln/plugin/registry.hpp"

#ifndef KILN_PLUGIN_INSTALL_SUBDIR
#define KILN_PLUGIN_INSTALL_SUBDIR "lib/kiln/plugins"
#endif

namespace kiln::plugin {
namespace {

void append_unique(std::vector<std::filesystem::path>& dirs, std::filesystem::path dir) {
  dir = dir.lexically_normal();
  for (const auto& known : dirs) {
    if (known == dir) return;
  }
  dirs.push_back(std::move(dir));
}

}  // namespace

std::string_view kind_name(std::uint32_t kind) noexcept {
  switch (kind) {
    case KILN_KIND_BACKEND: return "backend";
    case KILN_KIND_MODEL: return "model";
    case KILN_KIND_DATA: return "data";
    case KILN_KIND_COMMUNICATOR: return "communicator";
    case KILN_KIND_PRECISION: return "precision";
    default: return "unknown";
  }
}

std::vector<std::filesystem::path> default_search_path(
    const std::vector<std::filesystem::path>& cli_dirs) {
  std::vector<std::filesystem::path> dirs;
  for (const auto& dir : cli_dirs) append_unique(dirs, std::filesystem::absolute(dir));

  if (const char* env = std::getenv("KILN_PLUGIN_PATH")) {
    const std::string value = env;
    std::size_t begin = 0;
    while (begin <= value.size()) {
      const std::size_t end = std::min(value.find(':', begin), value.size());
      if (end > begin) {
        const std::filesystem::path entry = value.substr(begin, end - begin);
        // Like ld.so in secure mode: a relative entry would mean "wherever kiln happens to be
        // started", so a run in an untrusted directory could pick up planted plugins.
        if (entry.is_relative()) {
          throw PluginError("KILN_PLUGIN_PATH entry '" + entry.string() + "' is a relative path, which would "
                            "be looked up in whatever directory kiln runs from; use an absolute path (e.g. "
                            "KILN_PLUGIN_PATH=" + std::filesystem::absolute(entry).string() + ")");
        }
        append_unique(dirs, entry);
      }
      begin = end + 1;
    }
  }

  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto prefix = exe.parent_path() / "..";
    append_unique(dirs, prefix / KILN_PLUGIN_INSTALL_SUBDIR);
    // The build tree always uses lib/kiln/plugins, whatever the install's libdir is.
    append_unique(dirs, prefix / "lib/kiln/plugins");
  }
  return dirs;
}

}  // namespace kiln::plugin
