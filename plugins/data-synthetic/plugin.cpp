// The `synthetic` data plugin library's descriptor: name, version, parameter schema, factory.
#include <kiln/sdk/plugin.hpp>

#include "synthetic_source.hpp"

namespace {

constexpr kiln_param_spec_v1 kSyntheticParams[] = {
    {"shape", KILN_PARAM_INT_LIST, "[3, 224, 224]", nullptr, "Shape of one sample (f32), e.g. [3, 224, 224]."},
    {"classes", KILN_PARAM_INT, "1000", nullptr, "Number of classes; labels are uniform in [0, classes)."},
    {"count", KILN_PARAM_INT, "10000", nullptr, "Number of samples (ImageNet's train split has 1281167)."},
    {"seed", KILN_PARAM_INT, "0", nullptr, "Sample i is a pure function of (seed, i), the same every epoch."},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::DataSource, kiln::synthetic::SyntheticSource>(
    "synthetic", "0.1.0", "Seeded random f32 samples and labels, for benchmarks without a data set.",
    kSyntheticParams));
