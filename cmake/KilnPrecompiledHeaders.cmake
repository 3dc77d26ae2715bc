# Precompiled headers for Kiln's own largest targets (libkiln_core, the kiln CLI's commands,
# libkiln_sdk, the cpu backend; the tests have theirs in tests/test_pch.cmake). CI compiles Kiln
# from scratch more than once -- the main build, the sanitizer build and the container image's --
# and parsing the standard library, fmt, Boost.Program_options and oneDNN's C++ header was about a
# third of these targets' compile time (docs/building.md has the figures).
#
# Only third-party and standard headers go in: a Kiln header in a precompiled header would make
# every source of the target recompile when it changes. The header is force-included, so a source
# that forgets one of these #includes still compiles; for the installed SDK headers, which plugin
# authors include on their own, tests/sdk/check_plugin_boundary.sh compiles each one alone.
include_guard(GLOBAL)

# ccache passes over (compiles uncached) every source that uses a precompiled header unless its
# sloppiness includes pch_defines and time_macros (ccache's manual, "Precompiled headers"); the
# targets that use one are given a launcher that says so.
if(CMAKE_CXX_COMPILER_LAUNCHER MATCHES "ccache")
  set(KILN_PCH_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros
      ${CMAKE_CXX_COMPILER_LAUNCHER})
endif()

# kiln_precompile_headers(<target> <header>...)
# <target>'s C++ sources get <header>... precompiled once for the target and force-included.
function(kiln_precompile_headers target)
  target_precompile_headers(${target} PRIVATE ${ARGN})
  if(KILN_PCH_LAUNCHER)
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "${KILN_PCH_LAUNCHER}")
  endif()
endfunction()
