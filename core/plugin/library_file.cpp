// File checks and Boost.DLL loading for plugin libraries; see library_file.hpp for the order.
#include "library_file.hpp"

#include <boost/dll/library_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <ios>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/io/file_kind.hpp"
#include "kiln/plugin_abi.h"
#include "load_probe.hpp"
#include "path_trust.hpp"

namespace kiln::plugin {
namespace {

// The process-wide "late unload registry" (Boost.DLL FAQ): handles are never closed, because
// objects, vtables and exception types made by plugin code may live until exit. Keyed by
// canonical path, so scanning again (another Registry, a test) reuses the loaded library.
struct LoadedLibraries {
  std::mutex mutex;
  std::map<std::filesystem::path, std::pair<boost::dll::shared_library*, const void*>> by_path;
};

LoadedLibraries& loaded_libraries() {
  static auto* libraries = new LoadedLibraries();  // leaked on purpose, see above
  return *libraries;
}

// Boost's message is "boost::dll::shared_library::load() failed (dlerror system message: X)";
// the user only needs X.
std::string dlerror_text(const std::string& what) {
  const std::string marker = "dlerror system message: ";
  const auto at = what.find(marker);
  if (at == std::string::npos) return what;
  std::string text = what.substr(at + marker.size());
  if (!text.empty() && text.back() == ')') text.pop_back();
  return text;
}

void check_descriptor_present(const std::filesystem::path& library) {
  std::vector<std::string> symbols;
  try {
    boost::dll::library_info info(boost::dll::fs::path(library.string()));
    const auto sections = info.sections();
    if (std::find(sections.begin(), sections.end(), KILN_LIBRARY_SECTION) != sections.end()) {
      symbols = info.symbols(KILN_LIBRARY_SECTION);
    }
  } catch (const std::ios_base::failure&) {
    // boost::dll reads the ELF tables with a stream; running off the file's end is how a cut-short
    // copy shows, and the stream's own text ("basic_ios::clear: iostream error") says nothing.
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(library, ec);
    throw PluginError(library.string() + " is not a Kiln plugin library: cannot read it as an ELF shared library: " +
                      (ec ? std::string("the file") : "the file (" + std::to_string(bytes) + " bytes)") +
                      " ends before the tables its header points to (a truncated copy?)");
  } catch (const std::exception& e) {
    throw PluginError(library.string() + " is not a Kiln plugin library: cannot read it as an ELF "
                      "shared library (" + e.what() + ")");
  }
  if (std::find(symbols.begin(), symbols.end(), KILN_LIBRARY_SYMBOL) == symbols.end()) {
    throw PluginError(library.string() + " is not a Kiln plugin library: no '" KILN_LIBRARY_SYMBOL
                      "' descriptor in section '" KILN_LIBRARY_SECTION "' (build it with "
                      "kiln_add_plugin() and KILN_PLUGIN_LIBRARY(...) from the Kiln SDK, or remove "
                      "it from the plugin path)");
  }
}

}  // namespace

void check_directory_trusted(const std::filesystem::path& dir) { check_path_trusted(dir, "plugin directory"); }

const void* load_plugin_library(const std::filesystem::path& library) {
  check_path_trusted(library, "plugin library");
  // Reading a named pipe would wait for a writer forever; a directory is no library either.
  if (const std::string kind = io::not_a_regular_file(library); !kind.empty()) {
    throw PluginError("plugin library " + library.string() + " is " + kind + ", not a shared library file");
  }
  check_descriptor_present(library);

  std::error_code ec;
  auto key = std::filesystem::weakly_canonical(library, ec);
  if (ec) key = library;
  LoadedLibraries& loaded = loaded_libraries();
  std::lock_guard lock(loaded.mutex);
  if (const auto it = loaded.by_path.find(key); it != loaded.by_path.end()) return it->second.second;

  probe_library_load(library);  // its initialisers must not end the process (load_probe.hpp)
  auto handle = std::make_unique<boost::dll::shared_library>();
  try {
    handle->load(boost::dll::fs::path(library.string()),
                 boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const boost::system::system_error& e) {
    throw PluginError("cannot load plugin library " + library.string() + ": " +
                      dlerror_text(e.what()) + " (a missing dependency or a symbol this kiln "
                      "does not provide; rebuild the plugin against this Kiln SDK)");
  }

  const void* descriptor = nullptr;
  try {
    descriptor = handle->get<const void*>(KILN_LIBRARY_SYMBOL);
  } catch (const boost::system::system_error& e) {
    throw PluginError("plugin library " + library.string() + " lists '" KILN_LIBRARY_SYMBOL
                      "' in section '" KILN_LIBRARY_SECTION "' but it cannot be resolved: " +
                      dlerror_text(e.what()));
  }
  // Kept even if a later check refuses the library: its initialisers have run, so unloading
  // it would be no safer than keeping it.
  loaded.by_path.emplace(key, std::make_pair(handle.release(), descriptor));
  if (descriptor == nullptr) {
    throw PluginError("plugin library " + library.string() + " exports a null '" KILN_LIBRARY_SYMBOL
                      "' descriptor; rebuild it with KILN_PLUGIN_LIBRARY(...) from the Kiln SDK");
  }
  return descriptor;
}

}  // namespace kiln::plugin
