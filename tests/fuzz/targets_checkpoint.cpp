// The checkpoint targets: a checkpoint directory whose trainer.safetensors is the input (its
// model.safetensors is valid), read as `--resume` and `kiln eval` do before any model exists:
// both files' headers and checksums, then the position and run identity in the metadata; and one
// whose model.safetensors is the input (trainer.safetensors valid): the class names its metadata
// keeps (class_names.hpp).
#include <cmath>
#include <filesystem>

#include "fuzz_target.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/class_names.hpp"  // the seeds' JSON form

namespace kiln::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path& checkpoint_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::path(scratch_dir()) / "checkpoints" / "epoch-0003";
    fs::create_directories(d);
    const float w[4] = {0.5f, -1, 2, 0};
    io::write_safetensors(d / "model.safetensors", {{"fc.weight", DType::f32, {2, 2}, w}}, {});
    return d;
  }();
  return dir;
}

bool run_checkpoint(Input input) {
  const fs::path trainer = checkpoint_dir() / "trainer.safetensors";
  write_bytes(trainer.string(), input);
  try {
    const train::TrainerState state = train::inspect_checkpoint(checkpoint_dir());
    if (state.epochs_done < 0 || state.global_step < 0 || state.epoch_steps_done < 0)
      finding("inspect_checkpoint accepted a negative position");
    for (const auto& [key, value] : state.precision)
      if (!std::isfinite(value)) finding("inspect_checkpoint accepted a non-finite precision." + key);
    (void)train::checkpoint_name(state);
    return true;
  } catch (const kiln::Error& e) {
    expect_named(e, trainer.string());
    return false;
  }
}

std::vector<Bytes> checkpoint_seeds() {
  const fs::path path = fs::path(scratch_dir()) / "seed-trainer.safetensors";
  const float moment[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  io::write_safetensors(path, {{"exp_avg.fc.weight", DType::f32, {2, 2}, moment}},
                        {{"epochs_done", "3"}, {"global_step", "150"}, {"epoch_steps_done", "0"},
                         {"seed", "-1"}, {"optimizer_steps", "150"}, {"precision.loss_scale", "65536"},
                         {"run.model", "mlp"}, {"run.world_size", "2"}, {"state.early_stop.best", "0.25"}});
  // The same without checksums (as an older Kiln wrote it), so that mutations of the metadata
  // get past the metadata's CRC to the parsing of the position.
  return {read_bytes(path.string()),
          plain_safetensors(R"({"__metadata__":{"epochs_done":"3","global_step":"150","epoch_steps_done":"7",)"
                            R"("seed":"42","optimizer_steps":"150","precision.loss_scale":"1024",)"
                            R"("run.model":"mlp","state.early_stop.best":"0.5"},)"
                            R"("m":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                            4)};
}

/// A directory whose trainer.safetensors is valid and whose model.safetensors is the input.
const fs::path& model_file_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::path(scratch_dir()) / "checkpoints-model" / "epoch-0001";
    fs::create_directories(d);
    const float m[1] = {0.5f};
    io::write_safetensors(d / "trainer.safetensors", {{"exp_avg.fc.weight", DType::f32, {1}, m}},
                          {{"epochs_done", "1"}, {"global_step", "10"}, {"seed", "1"}, {"optimizer_steps", "10"}});
    return d;
  }();
  return dir;
}

bool run_checkpoint_classes(Input input) {
  const fs::path model = model_file_dir() / "model.safetensors";
  write_bytes(model.string(), input);
  try {
    const train::TrainerState state = train::inspect_checkpoint(model_file_dir());
    expect_valid_class_names(state.class_names, static_cast<std::int64_t>(state.class_names.size()),
                             "inspect_checkpoint");
    return true;
  } catch (const kiln::Error& e) {
    expect_named(e, model.string());
    return false;
  }
}

std::vector<Bytes> checkpoint_classes_seeds() {
  const fs::path path = fs::path(scratch_dir()) / "seed-model.safetensors";
  const float w[2] = {0.5f, -1};
  const train::ClassNames names = {"T-shirt/top", "tench, Tinca tinca", "say \"hi\"", "caf\xc3\xa9"};
  io::write_safetensors(path, {{"fc.weight", DType::f32, {2}, w}},
                        {{"format", "pt"}, {train::kClassNamesKey, train::class_names_json(names)}});
  // Without checksums, so that mutations of the names get past the metadata's CRC to their parser.
  return {read_bytes(path.string()),
          plain_safetensors(R"({"__metadata__":{"format":"pt","class_names":"[\"cat\",\"dog\",\"\\u00e9\"]"},)"
                            R"("fc.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                            4)};
}

const Target kTargets[] = {
    {"checkpoint", "kiln::train::inspect_checkpoint (--resume, kiln eval): trainer.safetensors' position and identity",
     run_checkpoint, checkpoint_seeds},
    {"checkpoint_classes", "kiln::train::inspect_checkpoint: the class names in model.safetensors' metadata",
     run_checkpoint_classes, checkpoint_classes_seeds},
};

}  // namespace

std::span<const Target> checkpoint_targets() { return kTargets; }

}  // namespace kiln::fuzz
