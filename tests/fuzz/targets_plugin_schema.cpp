// The plugin_schema target: a third-party plugin's parameter schema, as its library's descriptor
// hands it over (read_descriptor: names, types), then a config table validated against it
// (defaults, choices, bounds, flags), written out by resolved_toml() and read back.
//
// Input: lines up to a line "%%" describe up to 16 parameters, one per line, as tab-separated
// fields "name type default choices min max flags" ("~" is a null pointer; type and flags are
// numbers); the rest is the config file's text, whose [model] table is validated.
#include <cmath>
#include <cstring>
#include <deque>
#include <string>

#include "descriptor.hpp"
#include "fuzz_target.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/version.hpp"

namespace kiln::fuzz {
namespace {

constexpr const char* kSource = "fuzz.toml";
constexpr const char* kLibrary = "libkiln-model-fuzz.so";

void* never_called_create(const void*) { return nullptr; }
void never_called_destroy(std::uint32_t, void*) {}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(separator, at);
    parts.emplace_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) return parts;
    at = end + 1;
  }
}

/// Values read back must be the very values validated: doubles bit for bit (so -0.0, huge and
/// non-finite values too), everything else by ==.
bool same(const ParamValue& a, const ParamValue& b) {
  if (a.index() != b.index()) return false;
  const auto same_double = [](double x, double y) {
    return std::memcmp(&x, &y, sizeof x) == 0 || (std::isnan(x) && std::isnan(y));
  };
  if (const auto* x = std::get_if<double>(&a)) return same_double(*x, std::get<double>(b));
  if (const auto* x = std::get_if<std::vector<double>>(&a)) {
    const auto& y = std::get<std::vector<double>>(b);
    if (x->size() != y.size()) return false;
    for (std::size_t i = 0; i < x->size(); ++i)
      if (!same_double((*x)[i], y[i])) return false;
    return true;
  }
  return a == b;
}

bool run_plugin_schema(Input input) {
  const std::string_view all(reinterpret_cast<const char*>(input.data()), input.size());
  const std::size_t split_at = all.find("%%\n");
  if (split_at == std::string_view::npos) return false;
  // The descriptor's strings live here while it is read (a deque: no reallocation moves them).
  std::deque<std::string> strings;
  const auto c_string = [&](const std::string& field) -> const char* {
    if (field == "~") return nullptr;
    return strings.emplace_back(field.substr(0, field.find('\0'))).c_str();
  };
  std::vector<kiln_param_spec_v1> specs;
  for (const std::string& line : split(all.substr(0, split_at), '\n')) {
    if (line.empty() || specs.size() == 16) continue;
    std::vector<std::string> f = split(line, '\t');
    f.resize(7, "~");
    const auto number = [](const std::string& s) { return static_cast<std::uint32_t>(std::strtoul(s.c_str(), nullptr, 10)); };
    specs.push_back({c_string(f[0]), number(f[1]), c_string(f[2]), c_string(f[3]), "fuzzed", c_string(f[4]),
                     c_string(f[5]), number(f[6])});
  }
  const kiln_plugin_v1 plugin{sizeof(kiln_plugin_v1), KILN_KIND_MODEL, "fuzz", "1", "a fuzzed schema", specs.data(),
                              static_cast<std::uint32_t>(specs.size()), never_called_create, never_called_destroy};
  const kiln_library_v1 library{sizeof(kiln_library_v1), KILN_ABI_MAJOR, KILN_ABI_MINOR, KILN_TOOLCHAIN_KEY,
                                KILN_VERSION_STRING, 1, &plugin, KILN_CONTRACT_FINGERPRINT};
  std::vector<plugin::PluginInfo> infos;
  try {
    infos = plugin::read_descriptor(&library, kLibrary);
  } catch (const kiln::PluginError& e) {
    expect_named(e, kLibrary);
    return false;
  }
  const std::string text(all.substr(split_at + 3));
  ParamMap first;
  std::string resolved;
  try {
    config::Config cfg = config::Config::parse(text, kSource, {});
    (void)cfg.plugin_type("model");
    first = cfg.validate("model", infos.at(0).params);
    resolved = cfg.resolved_toml();
  } catch (const kiln::ConfigError& e) {
    // A value's mistake names the file; a schema's own (a bad default, say) names [model].
    const std::string_view message = e.what();
    if (message.find(kSource) == std::string_view::npos && message.find("[model]") == std::string_view::npos)
      finding(std::string("the error names neither the file nor the table: ") + e.what());
    return false;
  }
  try {
    config::Config again = config::Config::parse(resolved, "config.toml", {});
    (void)again.plugin_type("model");
    const ParamMap second = again.validate("model", infos.at(0).params);
    for (const auto& [key, param] : first.entries()) {
      const auto it = second.entries().find(key);
      if (it == second.entries().end() || !same(param.value, it->second.value))
        finding("[model] " + key + " does not read back the same from the resolved config:\n" + resolved);
    }
  } catch (const kiln::Error& e) {
    finding(std::string("the resolved config does not load again: ") + e.what() + "\n" + resolved);
  }
  return true;
}

std::vector<Bytes> plugin_schema_seeds() {
  return {bytes_of("hidden\t5\t[128]\t~\t1\t65536\t0\n"
                   "dropout\t3\t0.2\t~\t0\t1\t4\n"
                   "act\t4\t\"relu\"\trelu|gelu|tanh\t~\t~\t0\n"
                   "scale\t3\tinf\t~\t~\t~\t1\n"
                   "names\t7\t[\"a\", \"b\\u00e9\"]\t~\t~\t~\t0\n"
                   "%%\n"
                   "[model]\ntype = \"fuzz\"\nhidden = [1, 65536]\ndropout = -0.0\nact = \"gelu\"\nscale = nan\n"
                   "names = ['lit\\eral', \"tab\\there\"]\n"),
          bytes_of("on\t1\tfalse\t~\t~\t~\t0\nsteps\t2\t-1\t~\t-9223372036854775808\t~\t0\n"
                   "weights\t8\t\"\"\t~\t~\t~\t0\nrates\t6\t[1e-300, 1.5e300]\t~\t~\t~\t0\n"
                   "%%\n"
                   "model = { type = \"fuzz\", on = true, steps = -9223372036854775808, rates = [0.1, -2e-308] }\n")};
}

const Target kTargets[] = {
    {"plugin_schema", "a plugin's parameter schema (read_descriptor) and a config table validated against it",
     run_plugin_schema, plugin_schema_seeds},
};

}  // namespace

std::span<const Target> plugin_schema_targets() { return kTargets; }

}  // namespace kiln::fuzz
