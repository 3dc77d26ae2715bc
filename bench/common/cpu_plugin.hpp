// The cpu backend plugin loaded from its .so and backends made by it with one option set, for
// the benchmarks that time two settings of one option side by side through the plugin itself
// (conv3x3_winograd, conv_filter_avx2, conv_direct_avx2, conv_census).
#pragma once

#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

/// The paths a backend made by `p` has run its convolution calls on so far, one count per
/// "direction/path" (the plugin's exported kiln_cpu_conv_paths, plugins/backend-cpu/ops/conv_paths.hpp).
inline std::vector<std::pair<std::string, std::uint64_t>> conv_paths(const Plugin& p, const kiln::Backend& backend) {
  using Each = void (*)(const char*, const char*, std::uint64_t, void*);
  using Paths = std::vector<std::pair<std::string, std::uint64_t>>;
  const auto read = p.library.get<int(const kiln::Backend*, Each, void*)>("kiln_cpu_conv_paths");
  Paths paths;
  const Each each = [](const char* direction, const char* path, std::uint64_t calls, void* context) {
    static_cast<Paths*>(context)->emplace_back(std::string(direction) + "/" + path, calls);
  };
  if (read(&backend, each, &paths) != 1) throw std::runtime_error("kiln_cpu_conv_paths: not a cpu backend");
  return paths;
}

/// The path (or paths, joined by "+") whose count grew from `before` to `after` in `direction`.
inline std::string grown_path(const std::vector<std::pair<std::string, std::uint64_t>>& before,
                              const std::vector<std::pair<std::string, std::uint64_t>>& after,
                              const std::string& direction) {
  std::string grown;
  for (std::size_t i = 0; i < after.size() && i < before.size(); ++i) {
    const std::string& name = after[i].first;
    if (after[i].second == before[i].second || name.compare(0, direction.size() + 1, direction + "/") != 0) continue;
    grown += (grown.empty() ? "" : "+") + name.substr(direction.size() + 1);
  }
  return grown;
}

/// A backend with `threads` (0: all cores) and option `key` = `value`, the rest defaults.
inline Made make_backend(const Plugin& p, const std::string& key, const std::string& value, std::int64_t threads) {
  kiln::ParamMap params("backend");
  params.set("threads", threads, "bench");
  params.set(key, value, "bench");
  kiln::PluginArgs args;
  args.params = &params;
  return {p.plugin, static_cast<kiln::Backend*>(p.plugin->create(&args))};
}

/// The command line both A/B layer benchmarks take: the plugin, the option's two values, batch,
/// repetitions and threads.
struct AbOptions {
  std::string plugin_path, mode_a, mode_b;
  std::int64_t batch = 8, reps = 10, threads = 0;
};

/// Parses --plugin, --a, --b, --batch, --reps, --threads over the given defaults; prints the usage
/// and returns nothing on anything else.
inline std::optional<AbOptions> parse_ab_options(int argc, char** argv, AbOptions o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--plugin") o.plugin_path = next();
    else if (a == "--a") o.mode_a = next();
    else if (a == "--b") o.mode_b = next();
    else if (a == "--batch") o.batch = std::stoll(next());
    else if (a == "--reps") o.reps = std::stoll(next());
    else if (a == "--threads") o.threads = std::stoll(next());
    else {
      std::fprintf(stderr, "usage: %s --plugin libkiln-backend-cpu.so [--a MODE] [--b MODE] [--batch N] [--reps N] "
                           "[--threads N]\n", argv[0]);
      return std::nullopt;
    }
  }
  return o;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace kiln_bench
