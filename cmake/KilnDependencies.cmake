# Every dependency comes from a Debian package (scripts/setup.sh installs them); nothing is
# vendored or downloaded at build time. A missing package fails here with its package name.
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options unit_test_framework filesystem)
find_package(spdlog REQUIRED)         # libspdlog-dev (compiled, shared)
find_package(fmt REQUIRED)            # libfmt-dev (spdlog's formatter)
find_package(tomlplusplus REQUIRED)   # libtomlplusplus-dev
# oneDNN (libdnnl-dev). Debian's dnnl-config.cmake insists on OpenCL development files although
# only the CPU engine is used here, so the library and header are located directly instead.
find_path(KILN_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(KILN_DNNL_LIBRARY NAMES dnnl)
if(NOT KILN_DNNL_INCLUDE_DIR OR NOT KILN_DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN not found: install libdnnl-dev (scripts/setup.sh does)")
endif()
add_library(kiln_dnnl INTERFACE)
target_include_directories(kiln_dnnl INTERFACE ${KILN_DNNL_INCLUDE_DIR})
target_link_libraries(kiln_dnnl INTERFACE ${KILN_DNNL_LIBRARY})
find_package(OpenMP REQUIRED)
find_package(ZLIB REQUIRED)           # zlib1g-dev (gzip IDX files)
