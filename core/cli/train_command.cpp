// Options of `kiln train`. With --nproc the process is only a supervisor (supervised_train.hpp).
// Option abbreviations are off so the arguments the supervisor removes for the ranks are exactly
// the ones parsed here.
#include "train_command.hpp"

#include <boost/program_options.hpp>

#include <iostream>

#include "kiln/train/run.hpp"
#include "supervised_train.hpp"

namespace kiln::cli {
namespace po = boost::program_options;

int run_train_command(const std::vector<std::string>& args) {
  po::options_description opts("kiln train options");
  std::string config;
  std::vector<std::string> sets, plugin_paths;
  std::string run_dir, dump_params, resume;
  int rank = -1, world = -1, nproc = 0, max_restarts = 0;
  std::int64_t profile_warmup = 1;
  std::int64_t dry_run_steps = 3;
  opts.add_options()
      ("help,h", "show this help")
      ("config,c", po::value(&config)->required(), "TOML file describing the run")
      ("set,s", po::value(&sets)->composing(), "override a config key: --set optimizer.lr=0.01 (repeatable)")
      ("run-dir", po::value(&run_dir), "output directory (default: run.run_dir or runs/<timestamp>)")
      ("plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directory, searched first (repeatable)")
      ("nproc", po::value(&nproc), "start N local ranks and supervise them (like torchrun --nproc-per-node)")
      ("max-restarts", po::value(&max_restarts),
       "with --nproc: when a rank fails, start all ranks again from the newest checkpoint, up to K times "
       "(like torchrun --max-restarts; default 0)")
      ("rank", po::value(&rank), "this process's rank (with --world-size; overrides launcher variables)")
      ("world-size", po::value(&world), "number of ranks (with --rank)")
      ("resume", po::value(&resume),
       "continue the run in --run-dir from its newest checkpoint (auto), from a checkpoint directory, or from the "
       "newest checkpoint if there is one, else start it there (if-any: one command for a job and its restarts)")
      ("resume-ignore-config",
       "resume even if the checkpoint's run differs from this config (model, seed, batch, world size, data, precision)")
      ("dump-params", po::value(&dump_params), "after training, rank 0 writes the parameters here as raw f32")
      ("log-all-ranks", "every rank prints its log lines on the console, not only rank 0 (sets log.all_ranks)")
      ("check-sharding", "before training, check that every sample is read by exactly one rank in the first two "
                         "epochs and that the order changes (docs/distributed.md)")
      ("profile", "time every backend op of the training steps; print a per-op table at the end (docs/profiling.md)")
      ("profile-warmup", po::value(&profile_warmup), "steps not profiled first (default 1: plans are made then; implies --profile)")
      ("dry-run", "start as for real, train 3 optimizer steps and evaluate 3 batches on every rank, print what the "
                  "whole run would take, and keep nothing (docs/dry-run.md)")
      ("dry-run-steps", po::value(&dry_run_steps), "the steps (and eval batches) of --dry-run (implies it)");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: kiln train --config FILE [--set key=value]... [--run-dir DIR] [--nproc N [--max-restarts K]]\n\n"
              << opts << "\n";
    return 0;
  }
  po::notify(vm);

  if (vm.count("nproc")) {
    if (vm.count("rank") || vm.count("world-size")) {
      throw po::error("--nproc starts its own ranks; it cannot be combined with --rank/--world-size");
    }
    return run_supervised_train(SupervisedTrain{args, nproc, max_restarts, config, sets, run_dir, resume});
  }
  if (vm.count("max-restarts")) {
    throw po::error("--max-restarts restarts the ranks that --nproc starts; under mpirun, Slurm or torchrun use "
                    "their own restart options (torchrun --max-restarts)");
  }

  train::TrainCommand cmd;
  cmd.config = config;
  cmd.overrides = sets;
  if (vm.count("log-all-ranks")) cmd.overrides.push_back("log.all_ranks=true");
  cmd.run_dir = run_dir;
  cmd.dump_params = dump_params;
  cmd.resume = resume;
  cmd.resume_ignore_config = vm.count("resume-ignore-config") > 0;
  cmd.profile = vm.count("profile") > 0 || vm.count("profile-warmup") > 0;  // as --dry-run-steps implies --dry-run
  cmd.check_sharding = vm.count("check-sharding") > 0;
  if (profile_warmup < 0) throw po::error("--profile-warmup must be >= 0");
  cmd.profile_warmup = profile_warmup;
  if (vm.count("dry-run") || vm.count("dry-run-steps")) {
    if (dry_run_steps < 1) throw po::error("--dry-run-steps must be at least 1");
    cmd.dry_run_steps = dry_run_steps;
  }
  for (const auto& p : plugin_paths) cmd.plugin_dirs.emplace_back(p);
  if (vm.count("rank")) cmd.ranks.rank = rank;
  if (vm.count("world-size")) cmd.ranks.world_size = world;
  train::run_training(cmd);
  return 0;
}

}  // namespace kiln::cli
