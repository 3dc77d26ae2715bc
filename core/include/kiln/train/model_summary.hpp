// `kiln summary`: what a config's model is, without data, a communicator or a step: every
// parameter and buffer by name, shape and size, which ones train and with what weight decay.
// Keras' model.summary() and torchinfo's summary(), for the two questions users ask before a run:
// how large is it, and which names do [model] freeze and init_exclude patterns match.
//
// The model is built as a run builds it (same backend, precision and seed; ModelBuildContext with
// the config's freeze patterns) but for a batch of one, so even ResNet-50 builds in a moment and
// little memory. With [model] init the file is loaded into it as a run's start loads it, so a file
// that does not fit fails here with the run's message, and the table says what each tensor got. The config is validated as `kiln train` validates it (config_plugins.hpp), so a
// config the summary accepts is one a run accepts; the data plugins are validated but not opened.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/model.hpp"
#include "kiln/tensor.hpp"

namespace kiln::train {

struct SummaryRequest {
  std::filesystem::path config;
  std::vector<std::string> overrides;  ///< --set key=value
  std::vector<std::filesystem::path> plugin_dirs;
};

/// One parameter or buffer.
struct SummaryTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  std::int64_t values = 0;
  bool trains = false;          ///< a parameter that [model] freeze leaves out is false; buffers: false
  double weight_decay = 0;      ///< what the optimizer applies to it (0 for biases and norms, and frozen ones)
  bool frozen_buffer = false;   ///< a buffer training never writes (frozen_bn = "eval")
  /// With [model] init: "loaded" (the file's values), "init_exclude" (kept fresh on purpose) or
  /// "missing" (not in the file: kept fresh, under init_strict = false); "" without init.
  std::string init;
};

struct ModelSummary {
  std::string model;      ///< "resnet 0.1.0"
  std::string library;    ///< the file it came from
  InputSpec input;
  std::string precision;  ///< "bf16 0.1.0"
  DType param_dtype = DType::f32;
  DType compute_dtype = DType::f32;
  std::string optimizer;  ///< "sgd"
  double weight_decay = 0;  ///< the optimizer's
  std::string freeze;     ///< the freeze line a run logs ("freeze: 60 of 62 tensors ..."), "" without freeze
  std::string init_file;  ///< [model] init's file, "" without init
  std::vector<SummaryTensor> parameters;
  std::vector<SummaryTensor> buffers;
};

/// Builds the config's model and describes it. Throws what a run's start would for a bad config,
/// a missing plugin, a model that does not build, or freeze patterns that match nothing.
ModelSummary summarize_model(const SummaryRequest& request);

}  // namespace kiln::train
