// Saving and loading checkpoints (see the header for the layout and guarantees).
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/collective_purpose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/crash/crash_context.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/atomic_file.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/sdk/log.hpp"
#include "kiln/train/class_names.hpp"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

constexpr kiln_param_spec_v1 kCheckpointSchema[] = {
    {"every_epochs", KILN_PARAM_INT, "1", nullptr, "Write a checkpoint every N epochs (and after the last); 0 = never.", "0", nullptr},
    {"keep", KILN_PARAM_INT, "3", nullptr, "How many of the newest checkpoints to keep.", "1", nullptr},
    {"every_steps", KILN_PARAM_INT, "0", nullptr,
     "Also write a checkpoint every N optimizer steps (global step), in the middle of an epoch too; 0 = never.", "0",
     nullptr},
    {"keep_best", KILN_PARAM_STRING, "\"\"", nullptr,
     "Keep the checkpoint with the best value of this epoch metric in checkpoints/best (never pruned): "
     "eval_loss, eval_accuracy, eval_accuracy_top5, eval_ema_loss, eval_ema_accuracy, eval_ema_accuracy_top5 (with "
     "[ema]), train_loss, train_accuracy; \"\" = off."},
    {"keep_best_mode", KILN_PARAM_STRING, "\"auto\"", "auto|min|max",
     "Whether lower or higher is better for keep_best; auto: min for a loss, max for an accuracy."},
};

constexpr const char* kPrefix = "epoch-";

/// (epochs done, global step or 0) of a checkpoint folder named by checkpoint_name(), nullopt for
/// any other name. The numbers order checkpoints: as text "epoch-10000" would sort before
/// "epoch-2500" (the names pad to 4 and 8 digits, and runs go past both).
std::optional<std::pair<std::int64_t, std::int64_t>> checkpoint_position(const std::string& name) {
  const auto digits = [](std::string_view text, std::int64_t& value) {
    if (text.empty() || text.size() > 18) return false;
    value = 0;
    for (const char c : text) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    return true;
  };
  std::string_view rest(name);
  if (!rest.starts_with(kPrefix)) return std::nullopt;
  rest.remove_prefix(std::string_view(kPrefix).size());
  const std::size_t step_at = rest.find("-step-");
  std::int64_t epochs = 0, step = 0;
  if (!digits(rest.substr(0, step_at), epochs)) return std::nullopt;
  if (step_at != std::string_view::npos && !digits(rest.substr(step_at + 6), step)) return std::nullopt;
  return std::make_pair(epochs, step);
}

/// Host copies of device tensors, kept alive while the records point at them.
struct HostCopies {
  std::vector<Tensor> keep;
  io::TensorRecord add(Backend& backend, const std::string& name, const Tensor& t) {
    Tensor h = host_tensor(t.shape(), t.dtype());
    backend.copy(t, h);
    keep.push_back(h);
    return io::TensorRecord{name, t.dtype(), t.shape(), h.data()};
  }
};

std::string number(double v) { return fmt::format("{}", v); }

constexpr const char* kRunPrefix = "run.";  // trainer metadata keys holding the run identity
constexpr const char* kStatePrefix = "state.";  // trainer metadata keys holding TrainerState::extra

/// Reads one checkpoint file; any corruption becomes a DataError that says what to do about it.
io::SafetensorsFile read_file(const fs::path& path) {
  io::SafetensorsFile f;
  try {
    f = io::read_safetensors(path);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{}; {}", e.what(), kDamagedHint));
  }
  if (!f.checksummed) {
    log::get("train")->debug("{} carries no checksums (written by PyTorch or an older Kiln); its tensors are not "
                             "verified",
                             path.string());
  }
  return f;
}

/// A whole, non-negative number from the metadata: a damaged "epochs_done" must not become a
/// huge or negative position (or undefined behaviour when cast).
std::int64_t parse_count(const std::map<std::string, std::string>& meta, const std::string& key, const fs::path& file,
                         bool may_be_negative = false) {
  auto it = meta.find(key);
  if (it == meta.end()) throw DataError(fmt::format("{}: metadata has no '{}'; {}", file.string(), key, kDamagedHint));
  std::int64_t v = 0;
  const char* end = it->second.data() + it->second.size();
  const auto r = std::from_chars(it->second.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || (v < 0 && !may_be_negative)) {
    throw DataError(fmt::format("{}: metadata '{}' = '{}' is not a {}whole number; {}", file.string(), key,
                                it->second, may_be_negative ? "" : "non-negative ", kDamagedHint));
  }
  return v;
}

double parse_number(const std::map<std::string, std::string>& meta, const std::string& key, const fs::path& file) {
  auto it = meta.find(key);
  if (it == meta.end()) throw DataError(fmt::format("{}: metadata has no '{}'", file.string(), key));
  double v = 0;
  const auto r = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  // Non-finite values too: a "nan" loss scale restored into the precision policy trains to NaN.
  if (r.ec != std::errc() || r.ptr != it->second.data() + it->second.size() || !std::isfinite(v)) {
    throw DataError(fmt::format("{}: metadata '{}' = '{}' is not a finite number; {}", file.string(), key,
                                it->second, kDamagedHint));
  }
  return v;
}

/// Copies `src` (host, from the file) into `dst`, checking name, shape and dtype.
void restore(Backend& backend, const io::SafetensorsFile& file, const std::string& name, const Tensor& dst,
             const fs::path& path, std::set<std::string>& used) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end()) {
    throw DataError(fmt::format("{} has no tensor '{}' that this model needs; was it written by another model?",
                                path.string(), name));
  }
  const Tensor& src = it->second;
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype()) {
    throw DataError(fmt::format("{}: tensor '{}' is {} but the model's is {}", path.string(), name, src.describe(),
                                dst.describe()));
  }
  backend.copy(src, dst);
  used.insert(name);
}

void check_all_used(const io::SafetensorsFile& file, const std::set<std::string>& used, const fs::path& path) {
  for (const auto& [name, t] : file.tensors) {
    if (!used.count(name)) {
      throw DataError(fmt::format("{} has tensor '{}' that this model does not; was it written by another model?",
                                  path.string(), name));
    }
  }
}

/// Copies every tensor of `targets` from `file` by name and requires that the file holds no other.
void restore_all(Backend& backend, const io::SafetensorsFile& file, const NamedTensors& targets, const fs::path& path) {
  std::set<std::string> used;
  for (const auto& [name, t] : targets) restore(backend, file, name, t, path, used);
  check_all_used(file, used, path);
}

/// "exp_avg" of "exp_avg.layers.0.weight": the kind of optimizer state a tensor holds.
std::string state_kind(const std::string& name) { return name.substr(0, name.find('.')); }

std::string kinds_text(const std::set<std::string>& kinds) {
  return kinds.empty() ? "none" : fmt::format("{}", fmt::join(kinds, ", "));
}

NamedTensors model_tensors(const Model& model) {
  NamedTensors out;
  for (const auto& p : model.parameters()) out.emplace_back(p.name, p.value);
  for (const auto& b : model.buffers()) out.emplace_back(b.name, b.value);
  return out;
}

/// Writes the files of a checkpoint into the directory `partial` (rank 0).
void write_partial(const fs::path& partial, Backend& backend, const Model& model, const Optimizer& optimizer,
                   const std::vector<std::pair<std::string, Tensor>>& opt_state, const PrecisionPolicy& precision,
                   const TrainerState& state, const WeightEma* ema,
                   const std::map<std::string, std::string>& extra_meta) {
  HostCopies copies;
  auto records_of = [&](const NamedTensors& tensors) {
    std::vector<io::TensorRecord> records;
    for (const auto& [name, t] : tensors) records.push_back(copies.add(backend, name, t));
    return records;
  };
  const std::vector<io::TensorRecord> model_records = records_of(model_tensors(model));
  std::map<std::string, std::string> model_meta = {{"format", "pt"},
                                                   {"producer", "kiln"},
                                                   {"model", std::string(model.name())},
                                                   {"epoch", std::to_string(state.epochs_done)}};
  if (!state.class_names.empty()) model_meta[kClassNamesKey] = class_names_json(state.class_names);
  model_meta.insert(extra_meta.begin(), extra_meta.end());
  io::write_safetensors(partial / "model.safetensors", model_records, model_meta);
  if (ema) {  // the same names, metadata and class names: usable wherever model.safetensors is
    std::map<std::string, std::string> ema_meta = model_meta;
    ema_meta["ema.decay"] = number(ema->options().decay);
    ema_meta["ema.every_steps"] = std::to_string(ema->options().every_steps);
    io::write_safetensors(partial / kAveragedModelFile, records_of(ema->averages()), ema_meta);
  }

  const std::vector<io::TensorRecord> trainer_records = records_of(opt_state);
  std::map<std::string, std::string> meta = {
      {"producer", "kiln"},
      {"epochs_done", std::to_string(state.epochs_done)},
      {"epoch_steps_done", std::to_string(state.epoch_steps_done)},
      {"global_step", std::to_string(state.global_step)},
      {"optimizer_steps", std::to_string(optimizer.steps())},
      {"seed", std::to_string(state.seed)},
  };
  for (const auto& [k, v] : precision.state()) meta["precision." + k] = number(v);
  for (const auto& [k, v] : state.run) meta[kRunPrefix + k] = v;
  for (const auto& [k, v] : state.extra) meta[kStatePrefix + k] = number(v);
  meta.insert(extra_meta.begin(), extra_meta.end());
  io::write_safetensors(partial / "trainer.safetensors", trainer_records, meta);
}

}  // namespace

std::span<const kiln_param_spec_v1> checkpoint_schema() { return kCheckpointSchema; }

std::string checkpoint_name(const TrainerState& state) {
  if (state.epoch_steps_done == 0) return fmt::format("{}{:04d}", kPrefix, state.epochs_done);
  return fmt::format("{}{:04d}-step-{:08d}", kPrefix, state.epochs_done, state.global_step);
}

void save_checkpoint_to(const fs::path& final_dir, Backend& backend, Communicator& comm, const Model& model,
                        Optimizer& optimizer, const PrecisionPolicy& precision, const TrainerState& state,
                        const WeightEma* ema, const std::map<std::string, std::string>& extra_meta) {
  const crash::PhaseScope phase("writing a checkpoint");
  auto params = model.parameters();
  // Every rank builds the optimizer state views (allocation is collective-free but keeps the
  // optimizer in the same state on every rank).
  const auto opt_state = optimizer.state_views(backend, params);
  if (comm.rank() == 0) {
    const fs::path partial = final_dir.parent_path() / (".partial-" + final_dir.filename().string());
    std::error_code ec;
    fs::remove_all(partial, ec);
    fs::create_directories(partial, ec);
    if (ec) throw IoError(fmt::format("cannot create {}: {}", partial.string(), ec.message()));

    // A failed write (a full disk, most likely) removes the partial directory, giving its space
    // back; the checkpoints already complete are untouched.
    try {
      write_partial(partial, backend, model, optimizer, opt_state, precision, state, ema, extra_meta);
    } catch (...) {
      fs::remove_all(partial, ec);
      throw;
    }
    fs::remove_all(final_dir, ec);
    fs::rename(partial, final_dir, ec);
    if (ec) throw IoError(fmt::format("cannot rename {} to {}: {}", partial.string(), final_dir.string(), ec.message()));
    io::sync_directory(final_dir.parent_path());  // the rename, durable
    log::get("train")->info("checkpoint written: {}", final_dir.string());
  }
  const CollectivePurpose purpose("barrier after rank 0 wrote a checkpoint");
  comm.barrier();
}

void save_checkpoint(const fs::path& dir, std::int64_t keep, Backend& backend, Communicator& comm, const Model& model,
                     Optimizer& optimizer, const PrecisionPolicy& precision, const TrainerState& state,
                     const WeightEma* ema) {
  const fs::path written = dir / checkpoint_name(state);
  save_checkpoint_to(written, backend, comm, model, optimizer, precision, state, ema);
  crash::set_last_checkpoint(written.string());  // every rank: all have passed the barrier after the rename
  if (comm.rank() == 0) {
    // Prune: keep the newest `keep` checkpoints.
    std::error_code ec;
    const std::vector<fs::path> all = checkpoints_oldest_first(dir, false);
    for (std::size_t i = 0; keep > 0 && i + static_cast<std::size_t>(keep) < all.size(); ++i) fs::remove_all(all[i], ec);
  }
}

std::vector<fs::path> checkpoints_oldest_first(const fs::path& dir, bool complete_only) {
  std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto position = checkpoint_position(e.path().filename().string());
    if (!position || !e.is_directory(ec)) continue;
    if (complete_only &&
        (!fs::exists(e.path() / "model.safetensors", ec) || !fs::exists(e.path() / "trainer.safetensors", ec))) {
      continue;
    }
    found.emplace_back(*position, e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [position, path] : found) out.push_back(std::move(path));
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  const std::vector<fs::path> all = checkpoints_oldest_first(dir, true);
  if (all.empty()) return std::nullopt;
  return all.back();
}

namespace {

/// The position and identity in trainer.safetensors' metadata.
TrainerState parse_state(const io::SafetensorsFile& trainer, const fs::path& trainer_file) {
  TrainerState st;
  st.epochs_done = parse_count(trainer.metadata, "epochs_done", trainer_file);
  st.global_step = parse_count(trainer.metadata, "global_step", trainer_file);
  // Absent from checkpoints written before step-based checkpoints: those are all epoch ends.
  if (trainer.metadata.count("epoch_steps_done")) {
    st.epoch_steps_done = parse_count(trainer.metadata, "epoch_steps_done", trainer_file);
  }
  st.seed = parse_count(trainer.metadata, "seed", trainer_file, true);
  (void)parse_count(trainer.metadata, "optimizer_steps", trainer_file);
  for (const auto& [k, v] : trainer.metadata) {
    if (k.rfind("precision.", 0) == 0) st.precision[k.substr(10)] = parse_number(trainer.metadata, k, trainer_file);
    if (k.rfind(kRunPrefix, 0) == 0) st.run[k.substr(std::string(kRunPrefix).size())] = v;
    if (k.rfind(kStatePrefix, 0) == 0) {
      st.extra[k.substr(std::string(kStatePrefix).size())] = parse_number(trainer.metadata, k, trainer_file);
    }
  }
  return st;
}

}  // namespace

TrainerState inspect_checkpoint(const fs::path& checkpoint) {
  const fs::path model_file = checkpoint / "model.safetensors";
  const io::SafetensorsFile weights = read_file(model_file);
  const fs::path trainer_file = checkpoint / "trainer.safetensors";
  TrainerState st = parse_state(read_file(trainer_file), trainer_file);
  st.class_names = parse_class_names(weights.metadata, model_file.string());
  // A damaged average would fail the resume that loads it: `--resume auto` skips it here instead.
  if (const fs::path ema_file = checkpoint / kAveragedModelFile; fs::exists(ema_file)) (void)read_file(ema_file);
  return st;
}

std::map<std::string, std::string> checkpoint_metadata(const fs::path& checkpoint) {
  const fs::path trainer_file = checkpoint / "trainer.safetensors";
  io::SafetensorsFile f = read_file(trainer_file);
  (void)parse_state(f, trainer_file);
  return f.metadata;
}

std::optional<IntactCheckpoint> latest_intact_checkpoint(const fs::path& dir) {
  const std::vector<fs::path> all = checkpoints_oldest_first(dir, true);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return IntactCheckpoint{*it, inspect_checkpoint(*it)};
    } catch (const Error& e) {
      log::get("train")->warn("--resume auto: skipping damaged checkpoint {}: {}", it->string(), e.what());
    }
  }
  return std::nullopt;
}

TrainerState load_checkpoint(const fs::path& checkpoint, Backend& backend, const Model& model, Optimizer& optimizer) {
  const fs::path model_file = checkpoint / "model.safetensors", trainer_file = checkpoint / "trainer.safetensors";
  const io::SafetensorsFile weights = read_file(model_file);
  const io::SafetensorsFile trainer = read_file(trainer_file);
  // Metadata first: nothing is copied into the model from a checkpoint whose position is nonsense.
  TrainerState st = parse_state(trainer, trainer_file);
  st.class_names = parse_class_names(weights.metadata, model_file.string());
  restore_all(backend, weights, model_tensors(model), model_file);
  // The weights fit, so other optimizer state means another optimizer (configuration.md: it may
  // change on resume): it starts afresh, as a new torch.optim object would, rather than failing
  // with "a tensor this model does not have".
  const NamedTensors views = optimizer.state_views(backend, model.parameters());
  std::set<std::string> kept, stored;
  for (const auto& [name, t] : views) kept.insert(state_kind(name));
  for (const auto& [name, t] : trainer.tensors) stored.insert(state_kind(name));
  if (kept != stored) {
    log::get("train")->warn(
        "{} holds {} where {} keeps {}: the optimizer changed since the checkpoint, so it starts afresh (no "
        "moments or momentum, step count 0); the weights, position and schedule continue",
        trainer_file.string(), stored.empty() ? "no optimizer state" : "optimizer state " + kinds_text(stored),
        optimizer.describe(), kinds_text(kept));
    return st;
  }
  restore_all(backend, trainer, views, trainer_file);
  optimizer.set_steps(parse_count(trainer.metadata, "optimizer_steps", trainer_file));
  return st;
}

bool load_averages(const fs::path& checkpoint, Backend& backend, const WeightEma& ema) {
  const fs::path file = checkpoint / kAveragedModelFile;
  if (!fs::exists(file)) return false;
  restore_all(backend, read_file(file), ema.averages(), file);
  return true;
}

void load_model_weights(const fs::path& file, Backend& backend, const Model& model) {
  restore_all(backend, read_file(file), model_tensors(model), file);
}

}  // namespace kiln::train
