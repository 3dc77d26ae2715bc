# Every dependency comes from a Debian package (scripts/setup.sh installs them); nothing is
# vendored or downloaded at build time. A missing package fails here with its package name.
find_package(Threads REQUIRED)
find_package(Boost 1.74 CONFIG REQUIRED COMPONENTS program_options unit_test_framework filesystem)
find_package(spdlog REQUIRED)         # libspdlog-dev (compiled, shared)
find_package(fmt REQUIRED)            # libfmt-dev (spdlog's formatter)
find_package(tomlplusplus REQUIRED)   # libtomlplusplus-dev
# oneDNN (libdnnl-dev). Debian's dnnl-config.cmake insists on OpenCL development files although
# only the CPU engine is used here, so the library and header are located directly instead.
# KILN_ONEDNN_ROOT builds against another oneDNN (2.6 or 3.x, built with GNU OpenMP) under one
# prefix, e.g. a venv with PyPI's onednn-devel-cpu-gomp: only there, never falling back to the
# system's (docs/building.md, "Another oneDNN").
set(KILN_ONEDNN_ROOT "" CACHE PATH "a oneDNN prefix (include/, lib/) instead of the system's libdnnl-dev")
if(KILN_ONEDNN_ROOT)
  # A root set or changed after the first configure must not keep the old root's cached paths.
  # (A prefix test, not MATCHES: a path may hold regex characters, /opt/c++/onednn.)
  string(FIND "${KILN_DNNL_INCLUDE_DIR}" "${KILN_ONEDNN_ROOT}" _kiln_dnnl_at)
  if(NOT _kiln_dnnl_at EQUAL 0)
    unset(KILN_DNNL_INCLUDE_DIR CACHE)
    unset(KILN_DNNL_LIBRARY CACHE)
  endif()
  find_path(KILN_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp PATHS ${KILN_ONEDNN_ROOT} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(KILN_DNNL_LIBRARY NAMES dnnl PATHS ${KILN_ONEDNN_ROOT} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
  set(_kiln_dnnl_missing "no oneDNN under KILN_ONEDNN_ROOT=${KILN_ONEDNN_ROOT} (include/oneapi/dnnl/dnnl.hpp and lib/libdnnl.so)")
else()
  find_path(KILN_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(KILN_DNNL_LIBRARY NAMES dnnl)
  set(_kiln_dnnl_missing "oneDNN not found: install libdnnl-dev (scripts/setup.sh does)")
endif()
if(NOT KILN_DNNL_INCLUDE_DIR OR NOT KILN_DNNL_LIBRARY)
  message(FATAL_ERROR "${_kiln_dnnl_missing}")
endif()
file(STRINGS "${KILN_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _kiln_dnnl_version
     REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" KILN_DNNL_VERSION
       "${_kiln_dnnl_version}")
if(KILN_DNNL_VERSION VERSION_LESS 2.6 OR KILN_DNNL_VERSION VERSION_GREATER_EQUAL 4)
  message(FATAL_ERROR "oneDNN ${KILN_DNNL_VERSION} at ${KILN_DNNL_INCLUDE_DIR}: the cpu backend builds against 2.6 and later 2.x, "
                      "or 3.x (plugins/backend-cpu/ops/onednn_compat.hpp)")
endif()
message(STATUS "oneDNN ${KILN_DNNL_VERSION}: ${KILN_DNNL_LIBRARY}")
add_library(kiln_dnnl INTERFACE)
target_include_directories(kiln_dnnl INTERFACE ${KILN_DNNL_INCLUDE_DIR})
target_link_libraries(kiln_dnnl INTERFACE ${KILN_DNNL_LIBRARY})
find_package(OpenMP REQUIRED)
find_package(ZLIB REQUIRED)           # zlib1g-dev (gzip IDX files)
