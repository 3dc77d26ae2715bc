// The test_precision executable: the LossScaler state machine, parameter runs, and the fp16 and
// bf16 precision plugins on the real cpu backend, one source per subject (this file only names
// the module).
#define KILN_TEST_MODULE test_precision
#include "kiln_test_main.hpp"
