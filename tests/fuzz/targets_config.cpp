// The config target: a run's TOML (and --set overrides) through the parser and the core's own
// table schemas, as `kiln train` validates them before it loads any plugin.
//
// Input: leading lines that start with "--set " are overrides (the rest of the line, as the CLI
// would pass it); everything after them is the file's text.
#include <string>

#include "fuzz_target.hpp"
#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/core_tables.hpp"

namespace kiln::fuzz {
namespace {

constexpr const char* kSource = "fuzz.toml";

/// A plugin-like table with one key of every parameter type, with bounds and choices, so the
/// validation of each type is reached (plugin schemas are the plugins' own; these stand in).
const kiln_param_spec_v1 kModelLike[] = {
    {"hidden", KILN_PARAM_INT_LIST, "[128]", nullptr, "sizes", "1", "65536", 0},
    {"dropout", KILN_PARAM_FLOAT, "0.2", nullptr, "rate", "0", "1", KILN_PARAM_MAX_EXCLUSIVE},
    {"activation", KILN_PARAM_STRING, "\"relu\"", "relu|gelu|tanh", "kind", nullptr, nullptr, 0},
    {"bias", KILN_PARAM_BOOL, "true", nullptr, "bias", nullptr, nullptr, 0},
    {"scales", KILN_PARAM_FLOAT_LIST, "[1.0, 0.5]", nullptr, "scales", "-1e6", "1e6", 0},
    {"tags", KILN_PARAM_STRING_LIST, "[]", nullptr, "tags", nullptr, nullptr, 0},
    {"weights", KILN_PARAM_PATH, "\"\"", nullptr, "file", nullptr, nullptr, 0},
    {"seed", KILN_PARAM_INT, "7", nullptr, "seed", "0", nullptr, 0},
};

void validate_like_train(config::Config& cfg) {
  (void)train::validate_core_tables(cfg);
  (void)cfg.plugin_type("model");
  (void)cfg.validate("model", kModelLike);
  (void)cfg.plugin_type("precision", "fp32");
  (void)cfg.validate("precision", {});
  cfg.check_all_consumed();
}

bool run_config(Input input) {
  std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  std::vector<std::string> overrides;
  while (text.starts_with("--set ")) {
    const std::size_t end = text.find('\n');
    overrides.emplace_back(text.substr(6, end == std::string_view::npos ? end : end - 6));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
  }
  std::string resolved;
  try {
    config::Config cfg = config::Config::parse(text, kSource, overrides);
    validate_like_train(cfg);
    resolved = cfg.resolved_toml();
  } catch (const kiln::ConfigError& e) {
    // Errors name the file or, for an override's own key, "--set <key>".
    if (std::string_view(e.what()).find("--set") == std::string_view::npos) expect_named(e, kSource);
    return false;
  }
  // What a run keeps as config.toml must load again and validate the same way.
  try {
    config::Config again = config::Config::parse(resolved, "config.toml", {});
    validate_like_train(again);
  } catch (const kiln::Error& e) {
    finding(std::string("the resolved config does not load again: ") + e.what() + "\n" + resolved);
  }
  return true;
}

std::vector<Bytes> config_seeds() {
  return {bytes_of("[run]\nepochs = 2\nseed = 3\n\n[loader]\nbatch = 64\nlast_batch = \"pad\"\n\n"
                   "[model]\ntype = \"mlp\"\nhidden = [256, 128]\ndropout = 0.1\n\n[optimizer]\ntype = \"sgd\"\n"
                   "lr = 0.05\nmomentum = 0.9\n\n[schedule]\ntype = \"cosine\"\nwarmup_epochs = 1\n\n"
                   "[checkpoint]\nevery_epochs = 1\n"),
          bytes_of("--set model.type=mlp\n--set run.epochs=3\n--set model.tags=[\"a\", \"b\"]\n"
                   "[loader]\nworkers = 2\nprefetch = 4\n[precision]\ntype = \"bf16\"\n"),
          bytes_of("model = { type = \"mlp\", scales = [1e5, -0.0, 3], weights = 'w.safetensors' }\n"
                   "[log]\nlevel = \"debug\"\n[early_stop]\nmetric = \"eval.loss\"\npatience = 2\n")};
}

const Target kTargets[] = {
    {"config", "kiln::config::Config (TOML, --set overrides, the core's table schemas, resolved_toml)",
     run_config, config_seeds},
};

}  // namespace

std::span<const Target> config_targets() { return kTargets; }

}  // namespace kiln::fuzz
