// Where plugins are looked for, and the human names of plugin kinds.
//
// Order matters (first match wins): explicit --plugin-path dirs, then KILN_PLUGIN_PATH entries,
// (absolute only: a relative one is an error), then the user's own ~/.local/lib/kiln/plugins,
// then the install's plugin dir found from the running executable (bin/../<libdir>/kiln/plugins;
// the build tree mirrors this as build/lib/kiln/plugins). Missing directories are kept in the
// list (they show up in "searched: ..." messages, which tells a user where plugins may go) and
// skipped by scan().
#include <cstdlib>
#include <optional>
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

// Whether an environment variable is set to something that means yes: any non-empty value but "0".
bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

}  // namespace

std::optional<std::filesystem::path> user_plugin_dir() {
  // As PYTHONNOUSERSITE does for pip's user site: a test suite or CI job that must see only the
  // plugins it names switches the per-user folder off.
  if (env_flag("KILN_NO_USER_PLUGINS")) return std::nullopt;
  const char* home = std::getenv("HOME");
  // No HOME (a daemon, `env -i`) or a relative one: there is no per-user folder to speak of, and a
  // relative HOME would make it depend on the directory kiln runs from (see KILN_PLUGIN_PATH).
  if (home == nullptr || *home == '\0') return std::nullopt;
  const std::filesystem::path dir = std::filesystem::path(home) / ".local/lib/kiln/plugins";
  if (dir.is_relative()) return std::nullopt;
  return dir.lexically_normal();
}

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

  // Someone who cannot write Kiln's prefix (a system install, the container image) installs
  // plugins for themselves here, as GStreamer's per-user folder or pip's user site.
  if (auto user_dir = user_plugin_dir()) append_unique(dirs, std::move(*user_dir));

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
