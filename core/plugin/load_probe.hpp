// Loading a plugin library once in a throw-away child process before the host loads it (private
// to core/plugin).
//
// Why: a library's initialisers (ELF constructors, static objects) run inside dlopen(), before
// Kiln can check anything, and may end the process: a crash, abort(), or `_exit(0)`, which no
// atexit handler or destructor can see, so `kiln train` would exit 0 without training. A forked
// child that only dlopen()s the library and reports back through a pipe shows the host what the
// initialisers did; the host refuses the library, with what happened, unless the child reported
// a clean load. The child touches nothing else (async-signal-safe calls plus dlopen, done while
// the host is single-threaded: plugins are scanned before any backend or loader thread starts).
#pragma once

#include <filesystem>

namespace kiln::plugin {

/// Throws PluginError naming `library` if loading it ends, kills or stalls the loading process
/// (limit: KILN_PLUGIN_PROBE_TIMEOUT_S, default 60 s). A plain dlopen() failure (a missing
/// dependency) is left to the real load, which reports dlerror().
void probe_library_load(const std::filesystem::path& library);

}  // namespace kiln::plugin
