// The `resnet` model plugin library's descriptor: name, version, parameter schema, factory.
// The schema, value ranges included, is validated by the core before the factory runs.
#include <kiln/sdk/plugin.hpp>

#include "resnet_model.hpp"

namespace {

constexpr kiln_param_spec_v1 kResnetParams[] = {
    {"depth", KILN_PARAM_INT, "50", nullptr,
     "Number of layers: 18/34 use basic blocks, 50/101/152 bottlenecks (v1.5: stride on the 3x3)."},
    {"num_classes", KILN_PARAM_INT, "1000", nullptr, "Number of output classes (logits).", "2", nullptr},
    {"width", KILN_PARAM_FLOAT, "1.0", nullptr,
     "Multiplier of the stage widths 64, 128, 256, 512 (rounded, at least 1); 1.0 is torchvision's.", "0",
     "64", KILN_PARAM_MIN_EXCLUSIVE},
    {"zero_init_residual", KILN_PARAM_BOOL, "false", nullptr,
     "Start the last BN gamma of every block at 0, so each block starts as the identity."},
    {"in_channels", KILN_PARAM_INT, "3", nullptr, "Channels of the input images.", "1", nullptr},
    {"image_size", KILN_PARAM_INT, "224", nullptr, "Height = width of the input images (ResNet downsamples by 32).",
     "32", nullptr},
    {"input", KILN_PARAM_STRING, "\"f32\"", "f32|u8",
     "f32: normalised (in_channels, H, W) images; u8: raw (H, W, 3) bytes normalised on the backend."},
    {"mean", KILN_PARAM_FLOAT_LIST, "[0.485, 0.456, 0.406]", nullptr,
     "input = \"u8\": per-channel mean (RGB) subtracted after scaling to [0, 1]."},
    {"std", KILN_PARAM_FLOAT_LIST, "[0.229, 0.224, 0.225]", nullptr,
     "input = \"u8\": per-channel std (RGB) dividing the centred value.", "0", nullptr,
     KILN_PARAM_MIN_EXCLUSIVE},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::Model, kiln::resnet::ResnetModel>(
    "resnet", "0.1.0", "ResNet v1.5 (torchvision names) at depth 18/34/50/101/152 with a width multiplier",
    kResnetParams));
