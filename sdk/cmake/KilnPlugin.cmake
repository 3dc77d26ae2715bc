# kiln_add_plugin(<name> SOURCES <files...> [LIBRARIES <targets...>])
#
# Builds a Kiln plugin library `libkiln-<name>.so` (by convention <name> is <kind>-<plugin>,
# e.g. model-mlp) as a MODULE:
#   - linked against libkiln_sdk only (Kiln::sdk): never the core, so the core can change
#     without breaking installed plugins as long as the contract fingerprint holds;
#   - stamped with the contract fingerprint of the headers it is compiled against
#     (KILN_CONTRACT_FINGERPRINT, computed by kiln_contract_fingerprint()), which the loader
#     compares with its own before anything in the library runs;
#   - hidden visibility so only the descriptor is exported, -Wl,--no-undefined so a missing
#     symbol fails the build instead of the run, a $ORIGIN-relative RUNPATH only.
# Works in the Kiln tree and against an installed SDK (find_package(Kiln)). Sets the plugin's
# output directory to KILN_PLUGIN_OUTPUT_DIR if set. A consumer that sets no build type gets an
# optimised build (Release), since an unoptimised plugin is 5-50x slower and nothing says so.
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type (kiln_add_plugin default: Release)" FORCE)
  message(STATUS "Kiln: no CMAKE_BUILD_TYPE given; plugins build as Release")
endif()

function(kiln_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "kiln_add_plugin(${name}): SOURCES is required")
  endif()
  if(NOT KILN_CONTRACT_FINGERPRINT)
    message(FATAL_ERROR "kiln_add_plugin(${name}): KILN_CONTRACT_FINGERPRINT is not set; "
                        "use find_package(Kiln) or build inside the Kiln tree")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Kiln::sdk ${ARG_LIBRARIES})
  target_compile_definitions(${name} PRIVATE KILN_CONTRACT_FINGERPRINT="${KILN_CONTRACT_FINGERPRINT}")
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "kiln-${name}"
    CXX_STANDARD 20
    CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    BUILD_RPATH_USE_ORIGIN ON
    INSTALL_RPATH "$ORIGIN/../..")
  target_link_options(${name} PRIVATE "LINKER:--no-undefined")
  if(DEFINED KILN_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${KILN_PLUGIN_OUTPUT_DIR}")
  endif()
endfunction()
