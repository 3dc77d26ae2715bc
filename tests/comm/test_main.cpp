// The test_comm executable: rendezvous stores, the communicator conformance suite for every
// in-tree communicator, and gloo's failure paths (this file only names the module).
#define BOOST_TEST_MODULE test_comm
#include <boost/test/unit_test.hpp>
