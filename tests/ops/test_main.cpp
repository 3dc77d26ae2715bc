// Entry point of test_cpu_ops (Boost.Test, dynamically linked): the suites live in test_*.cpp.
#define KILN_TEST_MODULE test_cpu_ops
#include "kiln_test_main.hpp"
