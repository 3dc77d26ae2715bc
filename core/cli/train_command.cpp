// Options of `kiln train`.
#include "train_command.hpp"

#include <boost/program_options.hpp>

#include <iostream>

#include "kiln/errors.hpp"
#include "kiln/train/run.hpp"

namespace kiln::cli {
namespace po = boost::program_options;

int run_train_command(const std::vector<std::string>& args) {
  po::options_description opts("kiln train options");
  std::string config;
  std::vector<std::string> sets, plugin_paths;
  std::string run_dir;
  int rank = -1, world = -1;
  opts.add_options()
      ("help,h", "show this help")
      ("config,c", po::value(&config)->required(), "TOML file describing the run")
      ("set,s", po::value(&sets)->composing(), "override a config key: --set optimizer.lr=0.01 (repeatable)")
      ("run-dir", po::value(&run_dir), "output directory (default: run.run_dir or runs/<timestamp>)")
      ("plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directory, searched first (repeatable)")
      ("rank", po::value(&rank), "this process's rank (with --world-size; overrides launcher variables)")
      ("world-size", po::value(&world), "number of ranks (with --rank)");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: kiln train --config FILE [--set key=value]... [--run-dir DIR]\n\n" << opts << "\n";
    return 0;
  }
  po::notify(vm);

  train::TrainCommand cmd;
  cmd.config = config;
  cmd.overrides = sets;
  cmd.run_dir = run_dir;
  for (const auto& p : plugin_paths) cmd.plugin_dirs.emplace_back(p);
  if (vm.count("rank")) cmd.ranks.rank = rank;
  if (vm.count("world-size")) cmd.ranks.world_size = world;
  train::run_training(cmd);
  return 0;
}

}  // namespace kiln::cli
