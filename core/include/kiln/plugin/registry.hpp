// Plugin discovery, checking and loading.
//
// The registry scans the search path (--plugin-path dirs, then KILN_PLUGIN_PATH entries, then
// <dir of the kiln executable>/../lib/kiln/plugins), in that order, for files named
// libkiln-*.so. For each file it: refuses paths someone other than the user or root could
// change (the whole written and resolved path, plugin/path_trust.hpp); confirms with
// boost::dll::library_info that the "kilnplug" section and the descriptor symbol exist (so a
// foreign .so is never executed); loads it once in a forked child, so initialisers that exit,
// crash or hang are refused instead of ending the host (plugin/load_probe.hpp); loads the
// library with immediate binding (RTLD_NOW | RTLD_LOCAL); reads kiln_library_v1 and checks abi_major ==, abi_minor <=, struct_size,
// toolchain key; then records each plugin it exports. The first plugin with a given
// (kind, name) wins; later ones are logged as shadowed. A library that fails is recorded with
// its reason (shown by `kiln plugins list`) and is an error only if a run asks for a plugin it
// might have provided.
//
// Lifetime: loaded libraries are never unloaded (they stay in a process-wide list until exit),
// so objects and exceptions made by plugin code can never outlive that code.
// A run does not scan: index() lists the libkiln-*.so files (after the directory checks) and a
// lookup loads, in search path order, the libraries named after the plugin it asks for
// (libkiln-<kind>-<name>.so, kind one of backend, model, data, comm, precision), and every other
// library only if none of those provides it. So a broken or hostile library elsewhere in the
// path does not touch a run that names its plugins' own libraries.
//
// Thread-safety: scan() and index() are not thread-safe; after scan(), lookups and create()
// are; after index(), lookups may load libraries and must come from one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data_source.hpp"
#include "kiln/model.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"
#include "kiln/precision_policy.hpp"

namespace kiln::plugin {

/// "backend", "model", "data", "communicator", "precision".
std::string_view kind_name(std::uint32_t kind) noexcept;

/// One plugin found in a loaded library.
struct PluginInfo {
  std::string name;
  std::uint32_t kind = 0;  // kiln_plugin_kind
  std::string version;
  std::string summary;
  std::filesystem::path library;
  std::uint16_t abi_major = 0;
  std::uint16_t abi_minor = 0;
  std::string kiln_version;   // SDK version the library was built against
  std::string contract_fingerprint;  // of the contract headers it was compiled against
  std::vector<kiln_param_spec_v1> params;  // strings point into the (never unloaded) library
  const kiln_plugin_v1* descriptor = nullptr;
};

/// A library that could not be used, and why (one sentence naming the file).
struct LoadFailure {
  std::filesystem::path library;
  std::string reason;
};

/// A plugin that lost to an earlier one with the same (kind, name) and is not used.
struct ShadowedPlugin {
  PluginInfo plugin;
  std::filesystem::path winner;  // library of the plugin that is used instead
};

/// The search path for a run: `cli_dirs`, then KILN_PLUGIN_PATH, then user_plugin_dir(), then the
/// install's plugin dir.
std::vector<std::filesystem::path> default_search_path(const std::vector<std::filesystem::path>& cli_dirs);

/// The per-user plugin folder, $HOME/.local/lib/kiln/plugins; none when HOME is unset, empty or
/// relative, or KILN_NO_USER_PLUGINS is set (to anything but "" or "0").
std::optional<std::filesystem::path> user_plugin_dir();

/// The file a run looks in first for a plugin: "libkiln-<kind>-<name>.so" ("comm" for a
/// communicator), e.g. libkiln-model-mlp.so.
std::string plugin_file_name(std::uint32_t kind, std::string_view name);

/// Whether a file name is one a directory scan looks at: libkiln-*.so.
bool is_plugin_file_name(const std::string& file_name);

/// One library file put through the loader's checks on its own (`kiln plugins check FILE`).
struct LibraryCheck {
  std::filesystem::path file;        ///< absolute, as given (not resolved)
  std::vector<PluginInfo> plugins;   ///< what it exports, when it passed every check
  std::string failure;               ///< the loader's reason, when it did not (then plugins is empty)
};

/// Runs on `file` every check a run makes before using a library (trusted path, the descriptor
/// section, the load in a child, immediate binding, the descriptor's ABI, toolchain key and
/// contract fingerprint), whatever the file's name or directory, and loads it if it passes.
/// Never throws for a bad library: the reason is in `failure`.
LibraryCheck check_library(const std::filesystem::path& file);

class Registry {
 public:
  explicit Registry(std::vector<std::filesystem::path> search_path);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  /// Movable: PluginInfo pointers and references stay valid (the vectors' buffers move).
  Registry(Registry&&) noexcept = default;
  Registry& operator=(Registry&&) noexcept = default;

  /// Scans the search path once, loading every library. Never throws for a bad library; see
  /// failures(). For `kiln plugins list` and tests.
  void scan();
  /// Lists the search path's plugin files without loading any; lookups then load on demand
  /// (see the file comment). What `kiln train`, eval and predict use.
  void index();

  const std::vector<std::filesystem::path>& search_path() const noexcept { return search_path_; }
  /// Every usable plugin loaded so far, in discovery order (a deque: growing it on a lazy
  /// lookup keeps earlier PluginInfo references valid).
  const std::deque<PluginInfo>& plugins() const noexcept { return plugins_; }
  const std::vector<LoadFailure>& failures() const noexcept { return failures_; }
  /// Plugins hidden by an earlier one of the same kind and name (also logged when found).
  const std::vector<ShadowedPlugin>& shadowed() const noexcept { return shadowed_; }

  /// The plugin of `kind` named `name`, or nullptr (after index(), loading what it needs).
  /// Throws PluginError if a library named after it (libkiln-<kind>-<name>.so) failed to load
  /// from a directory earlier in the search path than the library that provides it: that library
  /// was meant to be used, and a later one standing in for it without a word is what a user
  /// benchmarking their own build would never notice.
  const PluginInfo* find(std::uint32_t kind, std::string_view name) const;
  /// Like find(), but throws PluginError: "no model plugin named 'mpl' (asked for by [model]
  /// type) (did you mean 'mlp'?); known model plugins: mlp; searched: ...", followed by the
  /// libraries that failed to load, if any. `table` is the config table that asked ("model");
  /// `origin`, where its type was written ("run.toml:4:8"), starts the message when given.
  const PluginInfo& require(std::uint32_t kind, std::string_view name, std::string_view table,
                            std::string_view origin = {}) const;
  /// Every plugin named `name`, of any kind (for `kiln plugins show`). Throws PluginError with a
  /// did-you-mean over all names, the searched directories and the load failures if none.
  std::vector<const PluginInfo*> require_any_kind(std::string_view name) const;

  /// Creates an object with the plugin's factory. The returned pointer's deleter destroys it in
  /// the plugin's library. Errors from the factory are rethrown with the same kiln::Error type,
  /// the message prefixed by "<kind> plugin '<name>' (<library>): ".
  std::shared_ptr<Backend> create_backend(const PluginInfo& info, const PluginArgs& args) const;
  std::shared_ptr<Model> create_model(const PluginInfo& info, const PluginArgs& args) const;
  std::shared_ptr<DataSource> create_data(const PluginInfo& info, const PluginArgs& args) const;
  std::shared_ptr<Communicator> create_communicator(const PluginInfo& info, const PluginArgs& args) const;
  std::shared_ptr<PrecisionPolicy> create_precision(const PluginInfo& info, const PluginArgs& args) const;

 private:
  struct Candidate {
    std::filesystem::path file;
    bool tried = false;  ///< loaded, or failed and recorded in failures_
  };
  void load(Candidate& candidate) const;
  const PluginInfo* find_loaded(std::uint32_t kind, std::string_view name) const;
  /// Throws if a failed library called `own_file` comes before `winner`'s in the search path.
  void refuse_if_own_library_failed_earlier(const std::string& own_file, const PluginInfo& winner) const;

  std::vector<std::filesystem::path> search_path_;
  // Mutable: a lookup after index() loads libraries, which is not a change a caller can see
  // beyond plugins() growing.
  mutable std::vector<Candidate> candidates_;
  mutable std::set<std::filesystem::path> seen_;  ///< canonical paths of libraries loaded
  mutable std::deque<PluginInfo> plugins_;
  mutable std::vector<LoadFailure> failures_;
  mutable std::vector<ShadowedPlugin> shadowed_;
};

}  // namespace kiln::plugin
