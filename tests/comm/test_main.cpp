// The test_comm executable: rendezvous stores, the communicator conformance suite for every
// in-tree communicator, and gloo's failure paths (this file only names the module).
#define KILN_TEST_MODULE test_comm
#include "kiln_test_main.hpp"
