// Exceptions escaping a call into a plugin, turned into one line that names the plugin.
//
// Plugin code may throw anything: a kiln::Error, a std::exception from a library it uses, or (a
// bug) an int. Whatever escapes a call the core makes into a plugin object reaches the user as
//   data plugin 'csv' (libkiln-data-csv.so), read(): <what>
// with exit status 1: a kiln::Error keeps its type (the CLI and callers such as the launcher
// tell ConfigError from CommError by type), anything else becomes kiln::PluginError. Factory
// errors are prefixed by the Registry itself (registry.hpp).
//
// A crash inside the call cannot be caught; plugin_call() also records the call as this thread's
// innermost (kiln/crash/crash_context.hpp), which the fatal-signal report names.
//
// Cost: plugin_call() is an inlined try/catch, and C++ exceptions are table-driven, so a call
// that does not throw pays only for the crash record: a few stores to the stack and to static TLS.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "kiln/crash/crash_context.hpp"
#include "kiln/plugin/registry.hpp"

namespace kiln::plugin {

/// Who made an object: enough to name it in a message, independent of the Registry's lifetime.
struct PluginOrigin {
  std::string kind;     ///< "data", "model", ... (kind_name)
  std::string name;     ///< "csv"
  std::string library;  ///< the library's file name, "libkiln-data-csv.so"
};

PluginOrigin origin_of(const PluginInfo& info);

/// Rethrows the exception in flight as "<kind> plugin '<name>' (<library>), <method>: <what>",
/// keeping its kiln::Error type; std::exception and exceptions of any other type become
/// PluginError. An exception already located by an inner plugin_call() passes unchanged, so a
/// message never names two plugins. Call only from a catch block.
[[noreturn]] void rethrow_from_plugin(const PluginOrigin& origin, std::string_view method);

/// Like rethrow_from_plugin() for code that calls `origin`'s object among core code, e.g. the
/// trainer's backend calls: a kiln::Error other than BackendError was thrown by the core itself
/// and passes unchanged; a BackendError, or an exception of a type the core never throws, is
/// located as coming from `origin`.
[[noreturn]] void rethrow_from_plugin_or_core(const PluginOrigin& origin, std::string_view method);

/// For core code that a plugin calls back (GradSync's grad-ready callback inside a model's
/// backward()): rethrows the exception in flight marked as located, message unchanged, so the
/// plugin_call() around the plugin does not blame the plugin for the core's error.
[[noreturn]] void rethrow_past_plugin();

/// Runs `call` (a call into the plugin object made by `origin`) and locates what it throws.
template <class F>
decltype(auto) plugin_call(const PluginOrigin& origin, std::string_view method, F&& call) {
  const crash::PluginCallScope in_call(origin.kind, origin.name, origin.library, method);
  try {
    return std::forward<F>(call)();
  } catch (...) {
    rethrow_from_plugin(origin, method);
  }
}

}  // namespace kiln::plugin
