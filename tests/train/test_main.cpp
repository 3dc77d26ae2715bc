// The test_train executable: optimizers, LR schedules, GradSync, rank resolution, metrics.jsonl
// and the run directory, one source file per subject (this file only names the module).
#define KILN_TEST_MODULE test_train
#include "kiln_test_main.hpp"
