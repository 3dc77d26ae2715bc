# kiln_contract_fingerprint(<out-var> ROOTS <include-root>... [HEADERS <relative-path>...])
#
# The contract fingerprint: a SHA-256 (first 16 hex digits) over every header a plugin can see
# from Kiln -- the contract (kiln/*.hpp, kiln/plugin_abi.h) and the SDK (kiln/sdk/**) -- taken
# in sorted order of their paths relative to the include roots, path and content together. Any
# edit to any of them (a virtual added, a member moved, a comment changed) gives another value.
#
# Without HEADERS the headers are found by globbing the roots (the Kiln tree); the sorted list is
# also returned in <out-var>_HEADERS, which the install writes into KilnConfig.cmake. With
# HEADERS exactly those files are hashed (an installed SDK: other files that happen to sit under
# <prefix>/include/kiln, such as an older install's, do not count), and a missing one is an error.
#
# The host computes it from its source tree and compiles it into libkiln_sdk; kiln_add_plugin()
# gets it from the headers the plugin is compiled against (KilnConfig.cmake hashes the installed
# files themselves), so a copied or edited SDK never carries a stale value, and the loader
# refuses a plugin whose value differs from the host's.
function(kiln_contract_fingerprint out_var)
  cmake_parse_arguments(ARG "" "" "ROOTS;HEADERS" ${ARGN})
  set(relative "${ARG_HEADERS}")
  if(NOT relative)
    foreach(root ${ARG_ROOTS})
      file(GLOB_RECURSE found RELATIVE "${root}" "${root}/kiln/*.hpp" "${root}/kiln/*.h")
      list(APPEND relative ${found})
    endforeach()
  endif()
  list(SORT relative)
  list(REMOVE_DUPLICATES relative)
  if(NOT relative)
    message(FATAL_ERROR "kiln_contract_fingerprint: no Kiln headers under ${ARG_ROOTS}")
  endif()
  set(digest_input "")
  set(files "")
  foreach(rel ${relative})
    set(path "")
    foreach(root ${ARG_ROOTS})
      if(NOT path AND EXISTS "${root}/${rel}")
        set(path "${root}/${rel}")
      endif()
    endforeach()
    if(NOT path)
      message(FATAL_ERROR "Kiln SDK header ${rel} is missing under ${ARG_ROOTS}; reinstall Kiln")
    endif()
    file(SHA256 "${path}" content_hash)
    string(APPEND digest_input "${rel}:${content_hash}\n")
    list(APPEND files "${path}")
  endforeach()
  string(SHA256 digest "${digest_input}")
  string(SUBSTRING "${digest}" 0 16 digest)
  set(${out_var} "${digest}" PARENT_SCOPE)
  set(${out_var}_HEADERS "${relative}" PARENT_SCOPE)
  # Editing a header re-runs CMake, so the value is never older than the files.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
endfunction()
