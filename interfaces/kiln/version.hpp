// Versions and the toolchain key shared by the host and every plugin.
//
// C++ objects (std::string, std::shared_ptr, vtables, exceptions) cross the plugin boundary, so
// host and plugin must agree on the C++ ABI. The key is computed by the preprocessor from the
// compiler family, the standard library and its dual-ABI flag, and the Kiln ABI major; the
// loader refuses a library whose key differs and names both keys.
#pragma once

#include "kiln/plugin_abi.h"

#define KILN_STRINGIFY_DETAIL(x) #x
#define KILN_STRINGIFY(x) KILN_STRINGIFY_DETAIL(x)

#define KILN_VERSION_STRING "0.2.0"

#if defined(__clang__)
#define KILN_TOOLCHAIN_COMPILER "clang"
#elif defined(__GNUC__)
#define KILN_TOOLCHAIN_COMPILER "gcc"
#else
#define KILN_TOOLCHAIN_COMPILER "unknown"
#endif

#if defined(_LIBCPP_VERSION)
#define KILN_TOOLCHAIN_STDLIB "libc++"
#elif defined(__GLIBCXX__)
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
#define KILN_TOOLCHAIN_STDLIB "libstdc++-cxx11"
#else
#define KILN_TOOLCHAIN_STDLIB "libstdc++-old"
#endif
#else
#define KILN_TOOLCHAIN_STDLIB "unknown"
#endif

#define KILN_TOOLCHAIN_KEY                                                             \
  KILN_TOOLCHAIN_COMPILER "/" KILN_TOOLCHAIN_STDLIB "/kiln-abi-" KILN_STRINGIFY(KILN_ABI_MAJOR)

namespace kiln {
inline constexpr const char* kVersion = KILN_VERSION_STRING;
inline constexpr const char* kToolchainKey = KILN_TOOLCHAIN_KEY;
}  // namespace kiln
