// The `imagenet` plugin library's descriptor: name, version, parameter schema, factory.
//
// The core validates a [data.*] table against this schema before the factory runs, so
// ImagenetSource only re-checks value ranges and consistency, never key names or types.
#include <kiln/sdk/plugin.hpp>

#include "imagenet_source.hpp"

namespace {

constexpr kiln_param_spec_v1 kImagenetParams[] = {
    {"root", KILN_PARAM_PATH, nullptr, nullptr,
     "ImageNet root (relative: to the config file): holds <split>/<wnid>/*.JPEG (ImageFolder) or train-NNNNN-of-MMMMM / "
     "validation-NNNNN-of-MMMMM TFRecord shards."},
    {"layout", KILN_PARAM_STRING, "\"auto\"", "auto|folder|tfrecord|files",
     "On-disk layout; auto uses <root>/<split>/ if it is a directory, else the shards; files: every image under "
     "<root>, without labels (for kiln predict)."},
    {"split", KILN_PARAM_STRING, "\"train\"", "train|val", "Which split to read."},
    {"transform", KILN_PARAM_STRING, "\"auto\"", "auto|train|eval",
     "train: RandomResizedCrop + flip; eval: resize shorter side + centre crop; auto: train for "
     "split train, eval otherwise."},
    {"size", KILN_PARAM_INT, "224", nullptr,
     "Output side: samples are f32 (3, size, size), or u8 (size, size, 3) with output = \"u8\"."},
    {"output", KILN_PARAM_STRING, "\"f32\"", "f32|u8",
     "f32: normalised CHW samples; u8: the cropped/resized/flipped bytes HWC, before mean/std "
     "(the model normalises them on the backend, e.g. resnet input = \"u8\")."},
    {"resize", KILN_PARAM_INT, "256", nullptr, "Eval: the shorter side is resized to this first."},
    {"scale_min", KILN_PARAM_FLOAT, "0.08", nullptr, "RandomResizedCrop: smallest area fraction."},
    {"scale_max", KILN_PARAM_FLOAT, "1.0", nullptr, "RandomResizedCrop: largest area fraction."},
    {"ratio_min", KILN_PARAM_FLOAT, "0.75", nullptr, "RandomResizedCrop: smallest aspect ratio w/h."},
    {"ratio_max", KILN_PARAM_FLOAT, "1.3333333333333333", nullptr,
     "RandomResizedCrop: largest aspect ratio w/h."},
    {"flip", KILN_PARAM_BOOL, "true", nullptr, "Train: horizontal flip with probability 0.5."},
    {"mean", KILN_PARAM_FLOAT_LIST, "[0.485, 0.456, 0.406]", nullptr,
     "Per-channel mean (RGB) subtracted after scaling to [0, 1] (output = \"f32\" only)."},
    {"std", KILN_PARAM_FLOAT_LIST, "[0.229, 0.224, 0.225]", nullptr,
     "Per-channel std (RGB) dividing the centred value; each > 0 (output = \"f32\" only)."},
    {"label_offset", KILN_PARAM_INT, "-1", nullptr,
     "Added to TFRecord labels (build_imagenet_data.py writes 1..1000, so -1 gives 0..999)."},
    {"num_classes", KILN_PARAM_INT, "0", nullptr,
     "Number of classes; 0 = from the data (class directories, or 1001 + label_offset for TFRecord)."},
    {"class_names_file", KILN_PARAM_PATH, "\"\"", nullptr,
     "A text file naming the classes, one line per class, class 0 first (imagenet_classes.txt, "
     "LOC_synset_mapping.txt); empty: the class directories' names (folder layout), none (TFRecord)."},
    {"max_pixels", KILN_PARAM_INT, "100000000", nullptr,
     "Largest width x height accepted, checked from the header before decoding."},
    {"max_record_bytes", KILN_PARAM_INT, "67108864", nullptr,
     "Largest TFRecord record or image file accepted, in bytes."},
    {"decode_scaled", KILN_PARAM_BOOL, "true", nullptr,
     "Decode at 1/2, 1/4 or 1/8 scale in the DCT domain when the crop stays >= size there (faster; "
     "pixel values differ slightly from a full-resolution decode); false: always full resolution."},
    {"on_error", KILN_PARAM_STRING, "\"fail\"", "fail|skip",
     "Bad sample: fail with a DataError, or skip (replace by the next good one, count in the log)."},
};

}  // namespace

KILN_PLUGIN_LIBRARY(kiln::sdk::plugin<kiln::DataSource, kiln::imagenet::ImagenetSource>(
    "imagenet", "0.1.0",
    "ImageNet from an ImageFolder tree or TFRecord shards, libjpeg-turbo decoded, as f32 CHW or u8 HWC.",
    kImagenetParams));
