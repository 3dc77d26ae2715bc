# kiln_add_plugin(<name> SOURCES <files...> [LIBRARIES <targets...>])
#
# Builds a Kiln plugin library `libkiln-<name>.so` (by convention <name> is <kind>-<plugin>,
# e.g. model-mlp) as a MODULE: hidden visibility so only the descriptor is exported,
# -Wl,--no-undefined so a missing symbol fails the build instead of the run, linked against
# the shared libkiln_core that holds the error types and interface key functions, with a
# $ORIGIN-relative RUNPATH only. Works in the Kiln tree and against an installed SDK
# (find_package(Kiln)). Sets the plugin's output directory to KILN_PLUGIN_OUTPUT_DIR if set.
function(kiln_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "kiln_add_plugin(${name}): SOURCES is required")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE Kiln::core ${ARG_LIBRARIES})
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
