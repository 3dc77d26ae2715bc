// Helpers of the test_train executable: validated core tables from inline TOML, and plugins made
// through the registry of the build tree (for tests that drive the Trainer with real plugins).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/config/config.hpp"
#include "kiln/sdk/nn/parameter_store.hpp"
#include "kiln/params.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/plugin_abi.h"
#include "kiln/plugin_args.hpp"
#include "kiln/train/trainer.hpp"
#include "../nn/nn_fixture.hpp"

namespace kiln::test {

/// Validates `body` as table `table` ("optimizer", "schedule") against `schema`; the source
/// name in messages is "test.toml" and `body` starts on line 2.
inline ParamMap core_table(const std::string& table, const std::string& body,
                           std::span<const kiln_param_spec_v1> schema) {
  auto cfg = config::Config::parse("[" + table + "]\n" + body + "\n", "test.toml", {});
  return cfg.validate(table, schema);
}

/// The build tree's plugins, scanned once for the whole test executable.
inline plugin::Registry& plugin_registry() {
  static plugin::Registry* r = [] {
    auto* reg = new plugin::Registry({KILN_TEST_PLUGIN_DIR});
    reg->scan();
    return reg;
  }();
  return *r;
}

/// The plugins of one run, with the ParamMaps they were made from kept alive as long as they.
struct PluginRun {
  std::vector<std::unique_ptr<ParamMap>> params;
  train::RunParts parts;
  /// Makes plugin `name` of `kind` from the table `body` with registry member `create`.
  template <class Create>
  auto make(std::uint32_t kind, const std::string& name, const std::string& body, Create create) {
    params.push_back(std::make_unique<ParamMap>(plugin_params(kind, name, body)));
    PluginArgs args;
    args.params = params.back().get();
    return (plugin_registry().*create)(plugin_registry().require(kind, name, "test"), args);
  }
};

/// Makes the `local` communicator for `run` and connects it to the run's backend (set that first).
inline void connect_local_comm(PluginRun& run) {
  run.parts.comm = run.make(KILN_KIND_COMMUNICATOR, "local", "", &plugin::Registry::create_communicator);
  CommContext cc;
  cc.backend = run.parts.backend.get();
  run.parts.comm->connect(cc);
}

/// The options trainer tests with real plugins share: `epochs` epochs of SGD with momentum 0.9
/// at a constant learning rate `lr`, batches of `batch` from one loader worker, seed 3, the eval
/// split unshuffled, no progress line. Tests adjust the rest.
inline train::TrainerOptions sgd_trainer_options(int epochs, std::int64_t batch, double lr) {
  train::TrainerOptions o;
  o.epochs = epochs;
  o.seed = 3;
  o.train_loader.shard.batch = batch;
  o.train_loader.shard.seed = 3;
  o.train_loader.workers = 1;
  o.eval_loader = o.train_loader;
  o.eval_loader.shard.shuffle = data::Shuffle::no;
  o.optimizer_type = "sgd";
  o.optimizer_table = core_table("optimizer", "lr = " + std::to_string(lr) + "\nmomentum = 0.9",
                                 train::optimizer_schema("sgd"));
  o.schedule_type = "constant";
  o.schedule_table = core_table("schedule", "", train::schedule_schema("constant"));
  o.progress = io::Progress::Mode::never;
  return o;
}

}  // namespace kiln::test
