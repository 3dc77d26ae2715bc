// The `mnist` plugin library's descriptor: name, version, parameter schema, factory.
//
// The schema is what the core validates a [data.*] table against before the factory runs, so
// MnistSource checks neither key names, types nor the value ranges declared here.
#include <kiln/sdk/plugin.hpp>

#include "mnist_source.hpp"

namespace {

constexpr kiln_param_spec_v1 kMnistParams[] = {
    {"path", KILN_PARAM_PATH, "\"/usr/share/datasets/fashion-mnist\"", nullptr,
     "Folder with the IDX files (train-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz], ...); relative to the config file."},
    {"split", KILN_PARAM_STRING, "\"train\"", "train|test",
     "Which files to read: train-* (60000 samples) or t10k-* (10000)."},
    {"mean", KILN_PARAM_FLOAT, "0.0", nullptr,
     "Subtracted after scaling pixels to [0, 1]: x = (pixel / 255 - mean) / std."},
    {"std", KILN_PARAM_FLOAT, "1.0", nullptr, "Divides the centred pixel.", "0", nullptr, KILN_PARAM_MIN_EXCLUSIVE},
    {"flatten", KILN_PARAM_BOOL, "true", nullptr,
     "Sample shape (784) when true, (1, 28, 28) when false."},
    {"limit", KILN_PARAM_INT, "0", nullptr,
     "Use only the first `limit` samples (quick tests); 0 uses all.", "0", nullptr},
    {"num_classes", KILN_PARAM_INT, "10", nullptr,
     "Number of classes; a label >= num_classes is an error (IDX labels are bytes).", "1", "256"},
    {"class_names", KILN_PARAM_STRING_LIST, "[]", nullptr,
     "What each label is called, label 0 first: exactly num_classes names, or [] for none. Kept in the "
     "checkpoints and written by `kiln predict`."},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::DataSource, kiln::mnist::MnistSource>(
    "mnist", "0.1.0", "MNIST / Fashion-MNIST images from IDX files (raw or .gz), as f32.",
    kMnistParams));
