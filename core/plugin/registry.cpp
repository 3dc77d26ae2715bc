// The Registry: scans the search path, records usable plugins, shadowed duplicates and load
// failures, and creates plugin objects whose deleters run the plugin's own destroy().
//
// A bad library never stops a scan (it becomes a LoadFailure); it matters only when a run asks
// for a plugin, and then require() lists everything that could explain the miss.
// index() + lookups load on demand: a library named after the plugin asked for first
// (libkiln-<kind>-<name>.so), every other library only if none of those provides it.
#include <algorithm>
#include <cerrno>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "descriptor.hpp"
#include "edit_distance.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/plugin/registry.hpp"
#include "library_file.hpp"

namespace kiln::plugin {
namespace {

// Plugin files of `dir` in name order, so discovery (and thus which duplicate wins) is stable.
std::vector<std::filesystem::path> plugin_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_plugin_file_name(it->path().filename().string())) continue;
    // A link that cannot be followed (a loop, a dangling target) is kept, so that loading it
    // reports why instead of the file silently not being there.
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) || type_ec) files.push_back(it->path());
  }
  if (ec) {
    throw PluginError("cannot list plugin directory " + dir.string() + ": " + ec.message() +
                      " (check its permissions)");
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

// Re-throws the exception in flight with `prefix` on its message, keeping its kiln:: type, so
// a caller's `catch (const kiln::ConfigError&)` still sees a plugin's bad-parameter error.
[[noreturn]] void rethrow_with_prefix(const std::string& prefix) {
  try {
    throw;
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(prefix + e.what());
  } catch (const BackendError& e) {
    throw BackendError(prefix + e.what());
  } catch (const ConfigError& e) {
    throw ConfigError(prefix + e.what());
  } catch (const PluginError& e) {
    throw PluginError(prefix + e.what());
  } catch (const DataError& e) {
    throw DataError(prefix + e.what());
  } catch (const CommError& e) {
    throw CommError(prefix + e.what());
  } catch (const NumericError& e) {
    throw NumericError(prefix + e.what());
  } catch (const IoError& e) {
    throw IoError(prefix + e.what());
  } catch (const Error& e) {
    throw Error(prefix + e.what());
  } catch (const std::exception& e) {
    throw PluginError(prefix + e.what());
  } catch (...) {
    throw PluginError(prefix + "factory threw an exception that is not a std::exception");
  }
}

template <class T>
std::shared_ptr<T> create_object(const PluginInfo& info, std::uint32_t kind, const PluginArgs& args) {
  const std::string prefix = std::string(kind_name(info.kind)) + " plugin '" + info.name + "' (" +
                             info.library.string() + "): ";
  if (info.kind != kind || info.descriptor == nullptr) {
    throw PluginError(prefix + "asked to create a " + std::string(kind_name(kind)) +
                      " from it; pick a " + std::string(kind_name(kind)) + " plugin instead");
  }
  const kiln_plugin_v1* descriptor = info.descriptor;
  void* raw = nullptr;
  try {
    raw = descriptor->create(&args);
  } catch (...) {
    rethrow_with_prefix(prefix);
  }
  if (raw == nullptr) throw PluginError(prefix + "factory returned null; this is a plugin bug");
  // The factory returned static_cast<void*>(T*), so the reverse cast is exact. The deleter is host
  // code calling into the library, which stays loaded until exit.
  return std::shared_ptr<T>(static_cast<T*>(raw), [descriptor, kind](T* object) {
    descriptor->destroy(kind, static_cast<void*>(object));
  });
}

}  // namespace

bool is_plugin_file_name(const std::string& file_name) {
  constexpr std::string_view prefix = "libkiln-";
  constexpr std::string_view suffix = ".so";
  return file_name.size() > prefix.size() + suffix.size() && file_name.starts_with(prefix) &&
         file_name.ends_with(suffix);
}

LibraryCheck check_library(const std::filesystem::path& file) {
  LibraryCheck check;
  check.file = std::filesystem::absolute(file);
  try {
    check.plugins = read_descriptor(load_plugin_library(check.file), check.file);
  } catch (const PluginError& e) {
    check.failure = e.what();
  }
  return check;
}

Registry::Registry(std::vector<std::filesystem::path> search_path)
    : search_path_(std::move(search_path)) {}

void Registry::index() {
  plugins_.clear();
  failures_.clear();
  shadowed_.clear();
  candidates_.clear();
  seen_.clear();
  auto logger = log::get("plugin");
  for (const auto& dir : search_path_) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      if (ec && ec.value() == ELOOP) {
        failures_.push_back({dir, "plugin directory " + dir.string() + " cannot be resolved: a symlink loop (too "
                                  "many levels of symbolic links); fix or remove the link"});
        logger->warn("{}", failures_.back().reason);
      } else {
        logger->debug("plugin directory {} does not exist; skipped", dir.string());
      }
      continue;
    }
    try {
      check_directory_trusted(dir);
      for (auto& file : plugin_files(dir)) candidates_.push_back({std::move(file), false});
    } catch (const PluginError& e) {
      failures_.push_back({dir, e.what()});
      logger->warn("{}", e.what());
    }
  }
}

void Registry::scan() {
  index();
  for (auto& candidate : candidates_) load(candidate);
}

void Registry::load(Candidate& candidate) const {
  if (candidate.tried) return;
  candidate.tried = true;
  const auto& file = candidate.file;
  auto logger = log::get("plugin");
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(file, ec);
  if (!seen_.insert(ec ? file : canonical).second) return;  // a dir listed twice is loaded once
  std::vector<PluginInfo> found;
  try {
    found = read_descriptor(load_plugin_library(file), file);
  } catch (const PluginError& e) {
    failures_.push_back({file, e.what()});
    logger->debug("{}", e.what());
    return;
  }
  for (auto& info : found) {
    if (const PluginInfo* winner = find_loaded(info.kind, info.name)) {
      logger->warn("{} plugin '{}' in {} is shadowed by the one in {} (earlier in the plugin "
                   "path); using the latter",
                   kind_name(info.kind), info.name, file.string(), winner->library.string());
      shadowed_.push_back({std::move(info), winner->library});
    } else {
      logger->debug("found {} plugin '{}' {} in {}", kind_name(info.kind), info.name, info.version, file.string());
      plugins_.push_back(std::move(info));
    }
  }
}

const PluginInfo* Registry::find_loaded(std::uint32_t kind, std::string_view name) const {
  for (const auto& info : plugins_) {
    if (info.kind == kind && info.name == name) return &info;
  }
  return nullptr;
}

std::string plugin_file_name(std::uint32_t kind, std::string_view name) {
  const std::string_view kind_part = kind == KILN_KIND_COMMUNICATOR ? std::string_view("comm") : kind_name(kind);
  return "libkiln-" + std::string(kind_part) + "-" + std::string(name) + ".so";
}

const PluginInfo* Registry::find(std::uint32_t kind, std::string_view name) const {
  const std::string own_file = plugin_file_name(kind, name);
  const auto checked = [&](const PluginInfo* info) {
    if (info != nullptr) refuse_if_own_library_failed_earlier(own_file, *info);
    return info;
  };
  if (const PluginInfo* info = find_loaded(kind, name)) return checked(info);
  // Libraries named after the plugin first, in search path order; the others only if needed.
  for (auto& candidate : candidates_) {
    if (candidate.file.filename() == own_file) load(candidate);
  }
  if (const PluginInfo* info = find_loaded(kind, name)) return checked(info);
  for (auto& candidate : candidates_) load(candidate);
  return checked(find_loaded(kind, name));
}

void Registry::refuse_if_own_library_failed_earlier(const std::string& own_file, const PluginInfo& winner) const {
  // candidates_ is in search path order (directory by directory, each sorted by name).
  const auto position = [&](const std::filesystem::path& file) {
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      if (candidates_[i].file == file) return i;
    }
    return candidates_.size();
  };
  const std::size_t winner_at = position(winner.library);
  for (const LoadFailure& failure : failures_) {
    if (failure.library.filename() != own_file || position(failure.library) >= winner_at) continue;
    throw PluginError(fmt::format("{} plugin '{}': {} comes before {} in the plugin path but failed to load: {}; "
                                  "fix or remove it (Kiln does not fall back to a later library without a word)",
                                  kind_name(winner.kind), winner.name, failure.library.string(),
                                  winner.library.string(), failure.reason));
  }
}

namespace {

// "; searched: a, b; 2 libraries failed to load: <reason>; <reason>" — the tail of every
// "not found" message.
std::string search_report(const std::vector<std::filesystem::path>& search_path,
                          const std::vector<LoadFailure>& failures) {
  std::vector<std::string> dirs;
  for (const auto& dir : search_path) dirs.push_back(dir.string());
  std::string out = "; searched: " + (dirs.empty() ? std::string("(nothing)") : join(dirs, ", "));
  if (!failures.empty()) {
    std::vector<std::string> reasons;
    for (const auto& failure : failures) reasons.push_back(failure.reason);
    out += "; " + std::to_string(failures.size()) +
           (failures.size() == 1 ? " library" : " libraries") +
           " failed to load: " + join(reasons, "; ");
  }
  const auto user_dir = user_plugin_dir();
  out += " (add a directory with --plugin-path or KILN_PLUGIN_PATH" +
         (user_dir ? ", or copy the library into " + user_dir->string() : std::string()) +
         "; `kiln plugins list` shows every plugin found)";
  return out;
}

}  // namespace

const PluginInfo& Registry::require(std::uint32_t kind, std::string_view name, std::string_view table,
                                    std::string_view origin) const {
  if (const PluginInfo* info = find(kind, name)) return *info;  // on a miss, every library is loaded

  std::vector<std::string> same_kind;
  std::vector<std::string> other_kinds;  // "'cpu' is a backend plugin"
  for (const auto& info : plugins_) {
    if (info.kind == kind) {
      same_kind.push_back(info.name);
    } else if (info.name == name) {
      other_kinds.push_back("'" + info.name + "' is a " + std::string(kind_name(info.kind)) +
                            " plugin");
    }
  }
  const std::string kind_text(kind_name(kind));
  std::string message = (origin.empty() ? std::string() : std::string(origin) + ": ") + "no " + kind_text +
                        " plugin named '" + std::string(name) + "'";
  if (!table.empty()) message += " (asked for by [" + std::string(table) + "] type)";
  message += suggest_name(name, same_kind);
  if (!other_kinds.empty()) message += "; note: " + join(other_kinds, ", ");
  message += "; known " + kind_text + " plugins: " +
             (same_kind.empty() ? std::string("none") : join(same_kind, ", "));
  throw PluginError(message + search_report(search_path_, failures_));
}

std::vector<const PluginInfo*> Registry::require_any_kind(std::string_view name) const {
  for (auto& candidate : candidates_) load(candidate);
  std::vector<const PluginInfo*> matches;
  std::vector<std::string> names;
  for (const auto& info : plugins_) {
    if (info.name == name) matches.push_back(&info);
    if (std::find(names.begin(), names.end(), info.name) == names.end()) names.push_back(info.name);
  }
  if (!matches.empty()) return matches;
  throw PluginError("no plugin named '" + std::string(name) + "'" + suggest_name(name, names) +
                    "; known plugins: " + (names.empty() ? std::string("none") : join(names, ", ")) +
                    search_report(search_path_, failures_));
}

std::shared_ptr<Backend> Registry::create_backend(const PluginInfo& info, const PluginArgs& args) const {
  return create_object<Backend>(info, KILN_KIND_BACKEND, args);
}
std::shared_ptr<Model> Registry::create_model(const PluginInfo& info, const PluginArgs& args) const {
  return create_object<Model>(info, KILN_KIND_MODEL, args);
}
std::shared_ptr<DataSource> Registry::create_data(const PluginInfo& info, const PluginArgs& args) const {
  return create_object<DataSource>(info, KILN_KIND_DATA, args);
}
std::shared_ptr<Communicator> Registry::create_communicator(const PluginInfo& info,
                                                            const PluginArgs& args) const {
  return create_object<Communicator>(info, KILN_KIND_COMMUNICATOR, args);
}
std::shared_ptr<PrecisionPolicy> Registry::create_precision(const PluginInfo& info,
                                                            const PluginArgs& args) const {
  return create_object<PrecisionPolicy>(info, KILN_KIND_PRECISION, args);
}

}  // namespace kiln::plugin
