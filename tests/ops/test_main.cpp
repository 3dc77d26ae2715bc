// Entry point of test_cpu_ops (Boost.Test, dynamically linked): the suites live in test_*.cpp.
#define BOOST_TEST_MODULE test_cpu_ops
#include <boost/test/unit_test.hpp>
