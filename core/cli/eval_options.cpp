// Options shared by `kiln eval` and `kiln predict` (see eval_options.hpp).
#include "eval_options.hpp"

#include <boost/program_options.hpp>

#include "kiln/errors.hpp"

namespace kiln::cli {
namespace po = boost::program_options;

void EvalOptions::add_to(po::options_description& opts) {
  opts.add_options()
      ("run-dir", po::value(&run_dir)->required(), "the run directory `kiln train` wrote (its config.toml is read)")
      ("checkpoint", po::value(&checkpoint)->notifier([](const std::string& dir) {
         // "" would silently mean the default (a variable that expanded to nothing).
         if (dir.empty()) throw ConfigError("--checkpoint is empty; name a checkpoint directory, or leave it out for "
                                            "the newest complete one");
       }),
       "a checkpoint directory (default: the newest complete one in RUN_DIR/checkpoints)")
      ("ema", po::bool_switch(&ema),
       "use the checkpoint's moving average of the weights (model_ema.safetensors, written with [ema]) instead of "
       "its trained weights")
      ("set,s", po::value(&sets)->composing(),
       "override a key of the run's config, e.g. --set data.eval.type=mnist --set data.eval.path=DIR (repeatable)")
      ("plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directory, searched first (repeatable)");
}

train::EvalRequest EvalOptions::request() const {
  train::EvalRequest r;
  r.run_dir = run_dir;
  r.checkpoint = checkpoint;
  r.overrides = sets;
  r.averaged_weights = ema;
  for (const auto& p : plugin_paths) r.plugin_dirs.emplace_back(p);
  return r;
}

}  // namespace kiln::cli
