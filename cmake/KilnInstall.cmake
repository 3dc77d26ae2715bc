# Installs the CMake package that lets plugin authors write
#   find_package(Kiln 0.1 CONFIG REQUIRED)
#   kiln_add_plugin(model-mine SOURCES mine.cpp)
include(CMakePackageConfigHelpers)
# Exported names match the in-tree aliases (Kiln::sdk, Kiln::interfaces), so kiln_add_plugin()
# links the same name in the tree and against an installed SDK. libkiln_core is installed (the
# kiln executable needs it) but not exported: plugins never link it.
set_target_properties(kiln_sdk PROPERTIES EXPORT_NAME sdk)
set_target_properties(kiln_interfaces PROPERTIES EXPORT_NAME interfaces)
set(KILN_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_CMAKE_INSTALL_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/sdk/cmake/KilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/KilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/KilnConfig.cmake ${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/sdk/cmake/KilnPlugin.cmake
              ${PROJECT_SOURCE_DIR}/sdk/cmake/KilnContractFingerprint.cmake
        DESTINATION ${KILN_CMAKE_INSTALL_DIR})
