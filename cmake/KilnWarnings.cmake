# One place for the warning set every Kiln target uses.
add_library(kiln_warnings INTERFACE)
target_compile_options(kiln_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers>)
