// Writing a Kiln plugin library: the descriptor in three lines.
//
//   #include <kiln/sdk/plugin.hpp>
//
//   class MyModel final : public kiln::Model {
//    public:
//     explicit MyModel(const kiln::PluginArgs& args);   // args.params is already validated
//     ...
//   };
//
//   constexpr kiln_param_spec_v1 kMyModelParams[] = {
//       {"hidden", KILN_PARAM_INT_LIST, "[128]", nullptr, "Sizes of the hidden layers."},
//   };
//
//   KILN_PLUGIN_LIBRARY(
//       kiln::sdk::plugin<kiln::Model, MyModel>("my-model", "0.1.0", "What it is, in one line.",
//                                               kMyModelParams));
//
// KILN_PLUGIN_LIBRARY exports the library descriptor (kiln/plugin_abi.h) in the "kilnplug"
// section under the symbol "kiln_plugin_library", stamped with this SDK's ABI version, toolchain
// key and the contract fingerprint of the headers it is compiled against (kiln_add_plugin()
// computes it; the loader refuses any other value). A library may list several plugins, of any kinds, separated by commas.
//
// Factories: the SDK's create<> constructs Impl from PluginArgs. Only kiln::Error and
// std::exception may cross the boundary; anything else is turned into kiln::PluginError here,
// and the host adds the plugin's name and library to the message.
#pragma once

#include <boost/dll/alias.hpp>
#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include "kiln/backend.hpp"
#include "kiln/communicator.hpp"
#include "kiln/data_source.hpp"
#include "kiln/errors.hpp"
#include "kiln/model.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"
#include "kiln/precision_policy.hpp"
#include "kiln/version.hpp"

namespace kiln::sdk {

/// The plugin kind that implements interface `Base`.
template <class Base>
constexpr std::uint32_t kind_of() {
  if constexpr (std::is_same_v<Base, Backend>) return KILN_KIND_BACKEND;
  else if constexpr (std::is_same_v<Base, Model>) return KILN_KIND_MODEL;
  else if constexpr (std::is_same_v<Base, DataSource>) return KILN_KIND_DATA;
  else if constexpr (std::is_same_v<Base, Communicator>) return KILN_KIND_COMMUNICATOR;
  else {
    static_assert(std::is_same_v<Base, PrecisionPolicy>, "Base must be a kiln interface");
    return KILN_KIND_PRECISION;
  }
}

/// Factory trampoline: builds Impl, returns it as its interface pointer in a void*.
template <class Base, class Impl>
void* create(const void* args) {
  static_assert(std::is_base_of_v<Base, Impl>, "Impl must derive from Base");
  const auto& plugin_args = *static_cast<const PluginArgs*>(args);
  try {
    Base* object = new Impl(plugin_args);
    return static_cast<void*>(object);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PluginError(std::string("factory failed: ") + e.what());
  } catch (...) {
    throw PluginError("factory failed with an exception that is not a std::exception");
  }
}

/// Deletes an object made by create<>, inside the library that allocated it.
inline void destroy(std::uint32_t kind, void* object) {
  switch (kind) {
    case KILN_KIND_BACKEND: delete static_cast<Backend*>(object); break;
    case KILN_KIND_MODEL: delete static_cast<Model*>(object); break;
    case KILN_KIND_DATA: delete static_cast<DataSource*>(object); break;
    case KILN_KIND_COMMUNICATOR: delete static_cast<Communicator*>(object); break;
    case KILN_KIND_PRECISION: delete static_cast<PrecisionPolicy*>(object); break;
    default: break;
  }
}

/// One entry of KILN_PLUGIN_LIBRARY: plugin `name` implementing `Base` with class `Impl`.
template <class Base, class Impl>
constexpr kiln_plugin_v1 plugin(const char* name, const char* version, const char* summary,
                                std::span<const kiln_param_spec_v1> params = {}) {
  return kiln_plugin_v1{sizeof(kiln_plugin_v1),
                        kind_of<Base>(),
                        name,
                        version,
                        summary,
                        params.data(),
                        static_cast<std::uint32_t>(params.size()),
                        &create<Base, Impl>,
                        &destroy};
}

}  // namespace kiln::sdk

#ifndef KILN_CONTRACT_FINGERPRINT
#error "KILN_CONTRACT_FINGERPRINT is not defined: build plugins with kiln_add_plugin() from find_package(Kiln), which computes it from the headers you compile against"
#endif

/// Exports this library's descriptor. Use once per library, at namespace scope.
#define KILN_PLUGIN_LIBRARY(...)                                                            \
  namespace kiln_sdk_generated {                                                            \
  static const kiln_plugin_v1 plugins[] = {__VA_ARGS__};                                    \
  static const kiln_library_v1 library = {sizeof(kiln_library_v1),                          \
                                          KILN_ABI_MAJOR,                                   \
                                          KILN_ABI_MINOR,                                   \
                                          KILN_TOOLCHAIN_KEY,                               \
                                          KILN_VERSION_STRING,                              \
                                          static_cast<std::uint32_t>(sizeof(plugins) /      \
                                                                     sizeof(plugins[0])),   \
                                          plugins,                                          \
                                          KILN_CONTRACT_FINGERPRINT};                       \
  }                                                                                         \
  BOOST_DLL_ALIAS_SECTIONED(kiln_sdk_generated::library, kiln_plugin_library, kilnplug)
