// Locating exceptions that escape plugin calls (see kiln/plugin/plugin_call.hpp).
#include "kiln/plugin/plugin_call.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <typeinfo>

#include "kiln/errors.hpp"

namespace kiln::plugin {
namespace {

// Marks an error whose message already names the plugin it came from. A located error is an
// E (callers catch it as one) and also a Located, which is how an outer plugin_call() knows not
// to prefix it again.
class Located {
 public:
  virtual ~Located() = default;
};

template <class E>
class LocatedError final : public E, public Located {
 public:
  using E::E;
};

// The demangled name of the exception in flight ("int", "std::string"), for the message about an
// exception that is not a std::exception; its what() does not exist.
std::string current_exception_type() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "unknown";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type->name());
}

std::string prefix_of(const PluginOrigin& origin, std::string_view method) {
  return origin.kind + " plugin '" + origin.name + "' (" + origin.library + "), " + std::string(method) + ": ";
}

// Rethrows the kiln::Error in flight as the same type with `prefix` on its message.
[[noreturn]] void rethrow_kiln_error(const std::string& prefix) {
  try {
    throw;
  } catch (const UnsupportedError& e) {
    throw LocatedError<UnsupportedError>(prefix + e.what());
  } catch (const BackendError& e) {
    throw LocatedError<BackendError>(prefix + e.what());
  } catch (const ConfigError& e) {
    throw LocatedError<ConfigError>(prefix + e.what());
  } catch (const PluginError& e) {
    throw LocatedError<PluginError>(prefix + e.what());
  } catch (const DataError& e) {
    throw LocatedError<DataError>(prefix + e.what());
  } catch (const CommError& e) {
    throw LocatedError<CommError>(prefix + e.what());
  } catch (const NumericError& e) {
    throw LocatedError<NumericError>(prefix + e.what());
  } catch (const IoError& e) {
    throw LocatedError<IoError>(prefix + e.what());
  } catch (const Error& e) {
    throw LocatedError<Error>(prefix + e.what());
  }
}

// The exception in flight, when it is not a kiln::Error, as a located PluginError.
[[noreturn]] void rethrow_foreign(const std::string& prefix) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    throw LocatedError<PluginError>(prefix + "ran out of host memory (std::bad_alloc); reduce the batch size or the "
                                             "model");
  } catch (const std::exception& e) {
    throw LocatedError<PluginError>(prefix + e.what());
  } catch (...) {
    throw LocatedError<PluginError>(prefix + "threw an exception of type '" + current_exception_type() +
                                    "', which is not a std::exception (plugins must throw kiln::Error or "
                                    "std::exception; report this to the plugin's authors)");
  }
}

}  // namespace

PluginOrigin origin_of(const PluginInfo& info) {
  return PluginOrigin{std::string(kind_name(info.kind)), info.name, info.library.filename().string()};
}

void rethrow_from_plugin(const PluginOrigin& origin, std::string_view method) {
  const std::string prefix = prefix_of(origin, method);
  try {
    throw;
  } catch (const Located&) {
    throw;
  } catch (const Error&) {
    rethrow_kiln_error(prefix);
  } catch (...) {
    rethrow_foreign(prefix);
  }
}

void rethrow_from_plugin_or_core(const PluginOrigin& origin, std::string_view method) {
  try {
    throw;
  } catch (const Located&) {
    throw;
  } catch (const BackendError&) {
    rethrow_kiln_error(prefix_of(origin, method));
  } catch (const Error&) {
    throw;  // the core's own error (a config value, a checkpoint file): not the plugin's
  } catch (...) {
    rethrow_foreign(prefix_of(origin, method));
  }
}

void rethrow_past_plugin() {
  try {
    throw;
  } catch (const Located&) {
    throw;
  } catch (const Error&) {
    rethrow_kiln_error("");
  } catch (const std::exception& e) {
    throw LocatedError<Error>(std::string("internal error: ") + e.what());
  } catch (...) {
    throw LocatedError<Error>("internal error: an exception of type '" + current_exception_type() + "'");
  }
}

}  // namespace kiln::plugin
