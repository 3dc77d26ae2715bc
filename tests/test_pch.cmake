# A precompiled header for the test sources: <boost/test/unit_test.hpp> and the standard headers
# most tests include took about 1-1.5 s of each test source's compile at -O0, and the test sources
# were over half of a clean build's CPU time (CI builds from scratch on 2 cores). The header is
# compiled once (an owner target below) and every test executable reuses it: the test side of a
# clean build went from 587 to 370 CPU seconds with it and kiln_add_test_objects (README.md).
#
# GCC takes a precompiled header only where the compile's settings match the ones it was made
# with (otherwise it reads the headers themselves: slower, never wrong; CMake passes
# -Winvalid-pch, which says so in the build log). Hence the owners are compiled exactly like a
# test executable's sources (kiln_test_settings), with -fPIE instead of an object library's
# -fPIC, and a second owner serves the tests built with OpenMP (-fopenmp defines _OPENMP, which
# GCC checks).
# The header is force-included into every test source that uses it, so a test source that forgets
# to include one of these standard headers still compiles (it would not without the header).
set(KILN_TEST_PCH_HEADERS
    <boost/test/unit_test.hpp> <algorithm> <cmath> <cstdint> <cstring> <filesystem> <fstream>
    <functional> <map> <memory> <random> <sstream> <string> <vector>)

function(kiln_test_pch_owner name)
  # The owner's own source is empty: CMake compiles a precompiled header only for a target with a
  # source of that language.
  add_library(${name} OBJECT ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/test_pch_owner.cpp)
  kiln_test_settings(${name})
  target_link_libraries(${name} PRIVATE ${ARGN})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  if(CMAKE_POSITION_INDEPENDENT_CODE)
    target_compile_options(${name} PRIVATE ${CMAKE_CXX_COMPILE_OPTIONS_PIE})
  endif()
  kiln_precompile_headers(${name} ${KILN_TEST_PCH_HEADERS})  # cmake/KilnPrecompiledHeaders.cmake
endfunction()

kiln_test_pch_owner(kiln_test_pch)
kiln_test_pch_owner(kiln_test_pch_openmp OpenMP::OpenMP_CXX)

# kiln_test_use_pch(<target> [OPENMP] [OWN])
# Gives <target>'s C++ sources the shared header (the OpenMP owner's with OPENMP), or with OWN a
# header of its own (a target compiled with other settings than kiln_test_settings'). Sources that
# define BOOST_TEST_MODULE or BOOST_TEST_MAIN are left out: the header, included first, would hide
# Boost.Test's main() and master suite from them (tests/kiln_test_main.hpp is the way to a main()
# that keeps the header; the CUDA and MPI suites still use BOOST_TEST_MODULE). That is read from
# the sources when CMake runs: a source given such a #define later needs CMake rerun (else the
# link misses main()).
function(kiln_test_use_pch target)
  cmake_parse_arguments(ARG "OPENMP;OWN" "" "" ${ARGN})
  get_target_property(sources ${target} SOURCES)
  set(users 0)
  foreach(src IN LISTS sources)
    get_filename_component(path ${src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    set(main "")
    if(path MATCHES "\\.cpp$")
      file(STRINGS ${path} main REGEX "^#define BOOST_TEST_(MODULE|MAIN)" LIMIT_COUNT 1)
    endif()
    if(main OR NOT path MATCHES "\\.cpp$")
      set_source_files_properties(${path} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    else()
      math(EXPR users "${users} + 1")
    endif()
  endforeach()
  if(users EQUAL 0)
    return()
  endif()
  if(ARG_OWN)
    kiln_precompile_headers(${target} ${KILN_TEST_PCH_HEADERS})
    return()
  endif()
  # The launcher that lets ccache cache these sources (cmake/KilnPrecompiledHeaders.cmake).
  if(KILN_PCH_LAUNCHER)
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER "${KILN_PCH_LAUNCHER}")
  endif()
  if(ARG_OPENMP)
    target_precompile_headers(${target} REUSE_FROM kiln_test_pch_openmp)
  else()
    target_precompile_headers(${target} REUSE_FROM kiln_test_pch)
  endif()
endfunction()
