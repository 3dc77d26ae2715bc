// Descriptor checks; the rules are docs/plugin-abi.md's, the messages say what to rebuild.
#include "descriptor.hpp"

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/sdk_internal/fingerprint.hpp"
#include "kiln/version.hpp"

namespace kiln::plugin {
namespace {

// Far more than any real library; a larger count means we are reading garbage.
constexpr std::uint32_t kMaxPluginsPerLibrary = 1024;
// Likewise for one plugin's parameters; checked before the table is copied.
constexpr std::uint32_t kMaxParamsPerPlugin = 4096;

std::string abi_string(std::uint32_t major, std::uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string text_or_empty(const char* text) { return text ? std::string(text) : std::string(); }

[[noreturn]] void fail(const std::filesystem::path& library, const std::string& what) {
  throw PluginError("plugin library " + library.string() + ": " + what);
}

// Plugin and parameter names are what configs write: `type = "mlp"`, and parameters as bare TOML
// keys. A name outside that alphabet or longer than this is a damaged descriptor (a flipped byte
// in a copied library put raw code bytes into `kiln plugins show`'s key list), so the check reads
// at most this many bytes of it.
constexpr std::size_t kMaxNameBytes = 64;

bool is_config_name(const char* text) {
  const std::size_t length = strnlen(text, kMaxNameBytes + 1);
  return length <= kMaxNameBytes && config::is_bare_key(std::string_view(text, length));
}

// The name for a message about a bad one: printable ASCII kept, anything else as \xNN, cut short.
std::string shown_name(const char* text) {
  std::string out;
  for (std::size_t i = 0; i < kMaxNameBytes && text[i] != '\0'; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (strnlen(text, kMaxNameBytes + 1) > kMaxNameBytes) out += "...";
  return out;
}

// A plugin built for ABI 2.0/2.1 has parameter entries that end at `doc`; walking its table with
// this host's larger sizeof would read past each entry. Entries are copied with the stride the
// plugin was built with into zero-filled host structs, so its min, max and flags read as zeros.
std::vector<kiln_param_spec_v1> read_params(const kiln_plugin_v1& plugin, std::uint16_t abi_minor) {
  const std::size_t stride = abi_minor >= 2 ? sizeof(kiln_param_spec_v1) : offsetof(kiln_param_spec_v1, min);
  std::vector<kiln_param_spec_v1> out(plugin.num_params, kiln_param_spec_v1{});
  const auto* bytes = reinterpret_cast<const unsigned char*>(plugin.params);
  for (std::uint32_t i = 0; i < plugin.num_params; ++i) std::memcpy(&out[i], bytes + i * stride, stride);
  return out;
}

void check_params(const kiln_plugin_v1& plugin, const std::vector<kiln_param_spec_v1>& params,
                  const std::filesystem::path& library) {
  for (std::uint32_t i = 0; i < params.size(); ++i) {
    const kiln_param_spec_v1& p = params[i];
    if (p.name == nullptr || *p.name == '\0') {
      fail(library, "plugin '" + std::string(plugin.name) + "' parameter #" + std::to_string(i) +
                        " has no name");
    }
    if (!is_config_name(p.name)) {
      fail(library, "plugin '" + std::string(plugin.name) + "' parameter #" + std::to_string(i) + " is named '" +
                        shown_name(p.name) + "', which is not a TOML bare key of at most " +
                        std::to_string(kMaxNameBytes) +
                        " letters, digits, '_' and '-'; the library is damaged or was built wrong");
    }
    if (p.type < KILN_PARAM_BOOL || p.type > KILN_PARAM_PATH) {
      fail(library, "plugin '" + std::string(plugin.name) + "' parameter '" + p.name +
                        "' has unknown type " + std::to_string(p.type) +
                        " (kiln_param_type is 1..8 in ABI " +
                        abi_string(KILN_ABI_MAJOR, KILN_ABI_MINOR) + ")");
    }
  }
}

PluginInfo read_plugin(const kiln_plugin_v1& plugin, const kiln_library_v1& lib, std::uint32_t index,
                       const std::filesystem::path& library) {
  const std::string which = "plugin #" + std::to_string(index);
  if (plugin.name == nullptr || *plugin.name == '\0') fail(library, which + " has no name");
  if (!is_config_name(plugin.name)) {
    fail(library, which + " is named '" + shown_name(plugin.name) + "', which is not a name of at most " +
                      std::to_string(kMaxNameBytes) +
                      " letters, digits, '_' and '-'; the library is damaged or was built wrong");
  }
  const std::string name = plugin.name;
  if (plugin.kind < KILN_KIND_BACKEND || plugin.kind > KILN_KIND_PRECISION) {
    fail(library, "plugin '" + name + "' has unknown kind " + std::to_string(plugin.kind) +
                      " (known: 1 backend, 2 model, 3 data, 4 communicator, 5 precision)");
  }
  if (plugin.create == nullptr || plugin.destroy == nullptr) {
    fail(library, "plugin '" + name + "' has a null " +
                      (plugin.create == nullptr ? "create" : "destroy") +
                      " function; build it with kiln::sdk::plugin<>() from the Kiln SDK");
  }
  if (plugin.num_params > 0 && plugin.params == nullptr) {
    fail(library, "plugin '" + name + "' declares " + std::to_string(plugin.num_params) +
                      " parameters but no parameter table");
  }
  if (plugin.num_params > kMaxParamsPerPlugin) {
    fail(library, "plugin '" + name + "' declares " + std::to_string(plugin.num_params) +
                      " parameters (at most " + std::to_string(kMaxParamsPerPlugin) +
                      "); the descriptor is corrupt, rebuild the plugin");
  }
  std::vector<kiln_param_spec_v1> params = read_params(plugin, lib.abi_minor);
  check_params(plugin, params, library);

  PluginInfo info;
  info.name = name;
  info.kind = plugin.kind;
  info.version = text_or_empty(plugin.version);
  info.summary = text_or_empty(plugin.summary);
  info.library = library;
  info.abi_major = lib.abi_major;
  info.abi_minor = lib.abi_minor;
  info.kiln_version = text_or_empty(lib.kiln_version);
  info.contract_fingerprint = text_or_empty(lib.contract_fingerprint);
  info.params = std::move(params);
  return info;
}

// A library compiled against other contract headers may have other vtables or member layouts
// than this host; calling into it would crash at some later point with no message. Refused here.
void check_fingerprint(const PluginInfo& info, const std::filesystem::path& library) {
  const std::string host = sdk::host_contract_fingerprint();
  if (info.contract_fingerprint == host) return;
  const std::string theirs = info.contract_fingerprint.empty() ? "none" : info.contract_fingerprint;
  throw PluginError("plugin '" + info.name + "' (" + library.string() +
                    ") was built against Kiln contract " + theirs + " (SDK " + info.kiln_version +
                    ") but this kiln's contract is " + host + " (Kiln " KILN_VERSION_STRING
                    "); its interfaces differ, so loading it could crash: rebuild it against this "
                    "Kiln's SDK");
}

}  // namespace

std::vector<PluginInfo> read_descriptor(const void* raw, const std::filesystem::path& library) {
  const auto* bytes = static_cast<const unsigned char*>(raw);

  // struct_size, abi_major and abi_minor sit at the same offsets in every ABI version.
  std::uint32_t struct_size = 0;
  std::uint16_t abi_major = 0;
  std::uint16_t abi_minor = 0;
  std::memcpy(&struct_size, bytes + offsetof(kiln_library_v1, struct_size), sizeof struct_size);
  std::memcpy(&abi_major, bytes + offsetof(kiln_library_v1, abi_major), sizeof abi_major);
  std::memcpy(&abi_minor, bytes + offsetof(kiln_library_v1, abi_minor), sizeof abi_minor);

  const std::string ours = abi_string(KILN_ABI_MAJOR, KILN_ABI_MINOR);
  const std::string theirs = abi_string(abi_major, abi_minor);
  if (abi_major != KILN_ABI_MAJOR) {
    fail(library, "built for Kiln plugin ABI " + theirs + " but this kiln uses ABI " + ours +
                      " (major versions must be equal); rebuild the plugin against the Kiln " +
                      KILN_VERSION_STRING " SDK");
  }
  if (abi_minor > KILN_ABI_MINOR) {
    fail(library, "built for Kiln plugin ABI " + theirs + ", newer than this kiln's ABI " + ours +
                      "; upgrade kiln or rebuild the plugin against the Kiln " +
                      KILN_VERSION_STRING " SDK");
  }
  if (struct_size < sizeof(kiln_library_v1)) {
    fail(library, "descriptor kiln_library_v1 is " + std::to_string(struct_size) +
                      " bytes, smaller than the " + std::to_string(sizeof(kiln_library_v1)) +
                      " bytes ABI " + ours + " requires; the library is damaged or was not built "
                      "with KILN_PLUGIN_LIBRARY(...)");
  }
  kiln_library_v1 lib;
  std::memset(&lib, 0, sizeof lib);
  std::memcpy(&lib, bytes, std::min<std::size_t>(struct_size, sizeof lib));

  if (lib.toolchain_key == nullptr || std::strcmp(lib.toolchain_key, KILN_TOOLCHAIN_KEY) != 0) {
    fail(library, "toolchain key '" + text_or_empty(lib.toolchain_key) +
                      "' does not match this kiln's '" KILN_TOOLCHAIN_KEY
                      "' (C++ objects cross the plugin boundary, so both must use the same "
                      "compiler family and standard library); rebuild the plugin against this "
                      "Kiln SDK (" KILN_VERSION_STRING ") with the same toolchain");
  }
  if (lib.num_plugins == 0 || lib.plugins == nullptr) {
    fail(library, "descriptor lists no plugins; pass at least one kiln::sdk::plugin<>() to "
                  "KILN_PLUGIN_LIBRARY(...)");
  }
  if (lib.num_plugins > kMaxPluginsPerLibrary) {
    fail(library, "descriptor claims " + std::to_string(lib.num_plugins) +
                      " plugins; the library is damaged");
  }

  // The array was laid out with the plugin's sizeof(kiln_plugin_v1), which is the stride.
  const auto* entries = reinterpret_cast<const unsigned char*>(lib.plugins);
  std::uint32_t stride = 0;
  std::memcpy(&stride, entries + offsetof(kiln_plugin_v1, struct_size), sizeof stride);
  if (stride < sizeof(kiln_plugin_v1)) {
    fail(library, "descriptor kiln_plugin_v1 is " + std::to_string(stride) +
                      " bytes, smaller than the " + std::to_string(sizeof(kiln_plugin_v1)) +
                      " bytes ABI " + ours + " requires; the library is damaged");
  }

  std::vector<PluginInfo> infos;
  infos.reserve(lib.num_plugins);
  for (std::uint32_t i = 0; i < lib.num_plugins; ++i) {
    const unsigned char* entry = entries + std::size_t{stride} * i;
    kiln_plugin_v1 plugin;
    std::memset(&plugin, 0, sizeof plugin);
    std::memcpy(&plugin, entry, sizeof plugin);
    if (plugin.struct_size != stride) {
      fail(library, "plugin #" + std::to_string(i) + " has struct_size " +
                        std::to_string(plugin.struct_size) + " but plugin #0 has " +
                        std::to_string(stride) + "; the library is damaged");
    }
    PluginInfo info = read_plugin(plugin, lib, i, library);
    // Checked per plugin so the refusal names it; the entries' layout is fixed by the major.
    check_fingerprint(info, library);
    // Points into the library, which is never unloaded.
    info.descriptor = reinterpret_cast<const kiln_plugin_v1*>(entry);
    infos.push_back(std::move(info));
  }
  return infos;
}

}  // namespace kiln::plugin
