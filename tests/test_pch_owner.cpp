// The source of the targets that own the tests' precompiled header (tests/test_pch.cmake): CMake
// compiles the header as part of a target, and only for a target with a C++ source.
