// The `synthetic` data plugin library's descriptor: name, version, parameter schema, factory.
#include <kiln/sdk/plugin.hpp>

#include "synthetic_source.hpp"

namespace {

constexpr kiln_param_spec_v1 kSyntheticParams[] = {
    {"shape", KILN_PARAM_INT_LIST, "[3, 224, 224]", nullptr, "Shape of one sample, e.g. [3, 224, 224] (with output = \"u8\": [C, H, W] of the image).", "1", nullptr},
    {"classes", KILN_PARAM_INT, "1000", nullptr, "Number of classes; labels are uniform in [0, classes).", "1", "2147483647"},
    {"count", KILN_PARAM_INT, "10000", nullptr, "Number of samples (ImageNet's train split has 1281167).", "1", nullptr},
    {"seed", KILN_PARAM_INT, "0", nullptr, "Sample i is a pure function of (seed, i), the same every epoch.", "0", nullptr},
    {"output", KILN_PARAM_STRING, "\"f32\"", "f32|u8",
     "f32: normal-ish values in `shape`; u8: raw bytes (H, W, C) for shape [C, H, W] (model input = \"u8\")."},
    {"class_names", KILN_PARAM_STRING_LIST, "[]", nullptr,
     "Names of classes 0, 1, ... as given (the core checks them: at most `classes`), for trying out "
     "what a run does with names; [] = none."},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::DataSource, kiln::synthetic::SyntheticSource>(
    "synthetic", "0.1.0", "Seeded random f32 or u8 samples and labels, for benchmarks without a data set.",
    kSyntheticParams));
