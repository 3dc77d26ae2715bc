// The trust rule for plugin paths (policy in path_trust.hpp).
#include "path_trust.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "private_group.hpp"

namespace kiln::plugin {
namespace {

namespace fs = std::filesystem;

std::string user_name(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return pw ? fmt::format("{} (uid {})", pw->pw_name, uid) : fmt::format("uid {}", uid);
}

/// "/", "/a", "/a/b", ... "/a/b/c" for an absolute, normalised path.
std::vector<fs::path> prefixes(const fs::path& path) {
  std::vector<fs::path> out;
  fs::path p;
  for (const auto& part : path) {
    p /= part;
    out.push_back(p);
  }
  return out;
}

/// The directories that lead to the running executable ("/", ..., its own directory).
const std::vector<fs::path>& executable_ancestors() {
  static const std::vector<fs::path> dirs = [] {
    std::error_code ec;
    const fs::path exe = fs::canonical("/proc/self/exe", ec);
    if (ec) return std::vector<fs::path>{};
    return prefixes(exe.parent_path());
  }();
  return dirs;
}

bool leads_to_executable(const fs::path& dir) {
  for (const auto& d : executable_ancestors()) {
    if (d == dir) return true;
  }
  return false;
}

/// Why `component` (already lstat'ed into `st`) may not be trusted, or "" if it may be; `who`
/// becomes whoever could change it.
std::string distrust(const fs::path& component, const struct stat& st, std::string& fix, std::string& who) {
  who = "someone other than you or root";
  if (S_ISLNK(st.st_mode)) return "";  // a link's own mode means nothing; its directory was checked
  if (S_ISDIR(st.st_mode) && leads_to_executable(component)) return "";
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    const passwd* me = ::getpwuid(::geteuid());
    fix = fmt::format("`chown {} {}`, or keep plugins in a directory owned by you or root",
                      me ? std::string(me->pw_name) : std::to_string(::geteuid()), component.string());
    who = "that user";
    return fmt::format("is owned by {}, not by you or root", user_name(st.st_uid));
  }
  const bool sticky_root_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) && st.st_uid == 0;
  if ((st.st_mode & S_IWOTH) && !sticky_root_dir) {
    fix = fmt::format("`chmod o-w {}`", component.string());
    return "is world-writable";
  }
  if ((st.st_mode & S_IWGRP) && !sticky_root_dir) {
    const std::string shared = why_group_is_shared(st.st_gid, st.st_uid);
    if (shared.empty()) return "";  // a user-private group: its one member is the owner
    fix = fmt::format("`chmod g-w {}`", component.string());
    return fmt::format("is group-writable and {}", shared);
  }
  return "";
}

[[noreturn]] void refuse(const fs::path& target, std::string_view what, const fs::path& component,
                         const std::string& why, const std::string& who, const std::string& fix) {
  const bool library = what == "plugin library";
  const std::string consequence = library ? "refusing to load it" : "refusing to load plugins from it";
  if (component == target && why == "is world-writable") {
    // The common case, worded as before: the file or directory itself.
    throw PluginError(fmt::format("{} {} is world-writable, so anyone could {}; {} (fix with {})", what,
                                  target.string(), library ? "replace its code" : "plant code in it", consequence,
                                  fix));
  }
  if (component == target) {
    throw PluginError(fmt::format("{} {} {}, so {} could {}; {} (fix with {})", what, target.string(), why, who,
                                  library ? "replace its code" : "plant code in it", consequence, fix));
  }
  throw PluginError(fmt::format("{} {} is inside {}, which {}, so {} could replace what it holds; {} (fix with {})",
                                what, target.string(), component.string(), why, who, consequence, fix));
}

void check_chain(const fs::path& target, std::string_view what, const fs::path& path) {
  for (const auto& component : prefixes(path)) {
    struct stat st {};
    if (::lstat(component.c_str(), &st) != 0) {
      throw PluginError(fmt::format("{} {}: cannot inspect {}: {}", what, target.string(), component.string(),
                                    std::strerror(errno)));
    }
    std::string fix, who;
    const std::string why = distrust(component, st, fix, who);
    if (!why.empty()) refuse(target, what, component, why, who, fix);
  }
}

}  // namespace

void check_path_trusted(const fs::path& path, std::string_view what) {
  if (!path.is_absolute()) {
    throw PluginError(fmt::format("{} {} is a relative path; plugin paths must be absolute", what, path.string()));
  }
  const fs::path written = path.lexically_normal();
  check_chain(path, what, written);  // every directory a symlink sits in, as written
  char resolved[PATH_MAX];
  if (::realpath(written.c_str(), resolved) == nullptr) {
    const int err = errno;
    if (err == ELOOP) {
      throw PluginError(fmt::format("{} {} cannot be resolved: a symlink loop (too many levels of symbolic links); "
                                    "fix or remove the link",
                                    what, path.string()));
    }
    throw PluginError(fmt::format("{} {} cannot be resolved: {}", what, path.string(), std::strerror(err)));
  }
  if (written != fs::path(resolved)) check_chain(path, what, fs::path(resolved));  // where the links lead
}

}  // namespace kiln::plugin
