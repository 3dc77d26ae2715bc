// main() for a test executable: its one source with main() defines KILN_TEST_MODULE (the master
// suite's name) and includes this header, where Boost.Test would have
// `#define BOOST_TEST_MODULE <name>` before <boost/test/unit_test.hpp>.
//
// Why: Boost.Test emits main() when its header is read with BOOST_TEST_MODULE defined, but the
// tests' precompiled header (tests/test_pch.cmake) has read that header, without it, before the
// source's first line, so such a source would lose main() or have to do without the precompiled
// header (about 1 s of each test source's compile). These are the definitions BOOST_TEST_MODULE
// makes with BOOST_TEST_DYN_LINK (boost/test/unit_test_suite.hpp, boost/test/unit_test.hpp),
// made after the header instead; with or without the precompiled header they are the same.
#include <boost/test/unit_test.hpp>

#ifndef KILN_TEST_MODULE
#error "define KILN_TEST_MODULE (the suite's name) before including kiln_test_main.hpp"
#endif
#ifndef BOOST_TEST_DYN_LINK
#error "kiln_test_main.hpp makes the main() of the shared-library Boost.Test (BOOST_TEST_DYN_LINK)"
#endif

static const boost::unit_test::framework::impl::master_test_suite_name_setter kiln_test_module_name(
    BOOST_TEST_STRINGIZE(KILN_TEST_MODULE));

bool init_unit_test() { return true; }

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&init_unit_test, argc, argv); }
