// The cpu backend plugin loaded from its .so and backends made by it with one option set, for
// the benchmarks that time two settings of one option side by side through the plugin itself
// (conv3x3_winograd, conv_filter_avx2).
#pragma once

#include <boost/dll/shared_library.hpp>

#include <cstdint>
#include <string>

#include "kiln/backend.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"

namespace kiln_bench {

struct Plugin {
  boost::dll::shared_library library;
  const kiln_plugin_v1* plugin = nullptr;

  /// Loads the library at `path` and takes its first plugin (the cpu backend's only one).
  explicit Plugin(const std::string& path) {
    library.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    const auto* lib = static_cast<const kiln_library_v1*>(library.get<const void*>(KILN_LIBRARY_SYMBOL));
    plugin = &lib->plugins[0];
  }
};

/// A backend made by the plugin, destroyed by it (never unloaded before it is).
struct Made {
  const kiln_plugin_v1* plugin;
  kiln::Backend* backend;
  ~Made() { plugin->destroy(KILN_KIND_BACKEND, backend); }
};

/// A backend with `threads` (0: all cores) and option `key` = `value`, the rest defaults.
inline Made make_backend(const Plugin& p, const std::string& key, const std::string& value, std::int64_t threads) {
  kiln::ParamMap params("backend");
  params.set("threads", threads, "bench");
  params.set(key, value, "bench");
  kiln::PluginArgs args;
  args.params = &params;
  return {p.plugin, static_cast<kiln::Backend*>(p.plugin->create(&args))};
}

}  // namespace kiln_bench
