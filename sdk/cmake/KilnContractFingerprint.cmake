# kiln_contract_fingerprint(<out-var> <include-root>...)
#
# The contract fingerprint: a SHA-256 (first 16 hex digits) over every header a plugin can see
# from Kiln -- the contract (kiln/*.hpp, kiln/plugin_abi.h) and the SDK (kiln/sdk/**) -- taken
# in sorted order of their paths relative to the include roots, path and content together. Any
# edit to any of them (a virtual added, a member moved, a comment changed) gives another value.
#
# The host computes it from its source tree and compiles it into libkiln_sdk; kiln_add_plugin()
# computes it from the headers the plugin is compiled against (the installed prefix, or the tree)
# and stamps it into the plugin's descriptor. The loader refuses a plugin whose value differs.
# Because the value is computed from the very files the compiler reads, a copied or edited SDK
# can never carry a stale fingerprint.
function(kiln_contract_fingerprint out_var)
  set(entries "")
  set(files "")
  foreach(root ${ARGN})
    file(GLOB_RECURSE headers RELATIVE "${root}" "${root}/kiln/*.hpp" "${root}/kiln/*.h")
    foreach(rel ${headers})
      # Host-only headers of the tree (never installed) are not part of the contract.
      if(rel MATCHES "^kiln/sdk_internal/")
        continue()
      endif()
      list(APPEND entries "${rel}|${root}/${rel}")
    endforeach()
  endforeach()
  list(SORT entries)
  set(digest_input "")
  foreach(entry ${entries})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 rel)
    list(GET parts 1 path)
    file(SHA256 "${path}" content_hash)
    string(APPEND digest_input "${rel}:${content_hash}\n")
    list(APPEND files "${path}")
  endforeach()
  if(digest_input STREQUAL "")
    message(FATAL_ERROR "kiln_contract_fingerprint: no Kiln headers under ${ARGN}")
  endif()
  string(SHA256 digest "${digest_input}")
  string(SUBSTRING "${digest}" 0 16 digest)
  set(${out_var} "${digest}" PARENT_SCOPE)
  # Editing a header re-runs CMake, so the value is never older than the files.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
endfunction()
