// Schemas and helpers shared by the config tests. The schemas are shaped like the real tables
// (model, loader, data, optimizer); message_of() returns what() of the expected exception so a
// test can assert exact message text.
#pragma once

#include <boost/test/unit_test.hpp>

#include <array>
#include <string>

#include "kiln/plugin_abi.h"

namespace kiln::config::test {

inline constexpr std::array<kiln_param_spec_v1, 4> kModelSchema{{
    {"hidden", KILN_PARAM_INT_LIST, "[128]", nullptr, "Widths of the hidden layers."},
    {"activation", KILN_PARAM_STRING, "\"relu\"", "relu|tanh", "Hidden activation."},
    {"dropout", KILN_PARAM_FLOAT, "0.2", nullptr, "Dropout probability."},
    {"num_classes", KILN_PARAM_INT, "10", nullptr, "Number of output classes."},
}};

inline constexpr std::array<kiln_param_spec_v1, 4> kLoaderSchema{{
    {"batch", KILN_PARAM_INT, "64", nullptr, "Samples per rank per step."},
    {"workers", KILN_PARAM_INT, "1", nullptr, "Loader threads."},
    {"shuffle", KILN_PARAM_BOOL, "true", nullptr, "Shuffle every epoch."},
    {"last_batch", KILN_PARAM_STRING, "\"drop\"", "drop|pad", "What to do with a short batch."},
}};

inline constexpr std::array<kiln_param_spec_v1, 3> kDataSchema{{
    {"path", KILN_PARAM_STRING, nullptr, nullptr, "Directory holding the IDX files."},
    {"split", KILN_PARAM_STRING, "\"train\"", "train|test", "Which split to read."},
    {"mean", KILN_PARAM_FLOAT_LIST, "[0.5]", nullptr, "Per-channel mean."},
}};

inline constexpr std::array<kiln_param_spec_v1, 2> kOptimizerSchema{{
    {"type", KILN_PARAM_STRING, "\"sgd\"", "sgd|adam", "Optimizer."},
    {"lr", KILN_PARAM_FLOAT, "0.01", nullptr, "Learning rate."},
}};

/// what() of the E that `f` throws; fails the test if it throws nothing.
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  BOOST_FAIL("expected an exception, none was thrown");
  return {};
}

}  // namespace kiln::config::test
