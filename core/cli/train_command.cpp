// Options of `kiln train`, and the --nproc path.
//
// With --nproc the process is only a supervisor: it resolves the run directory (--run-dir, else
// run.run_dir, else runs/<timestamp>) from the config without loading any plugin, leaves its
// creation to the ranks, creates a private rendezvous directory, and re-executes itself N times
// with the same arguments minus --nproc plus --run-dir. Option abbreviations are off so the
// arguments removed for the ranks are exactly the ones parsed here.
#include "train_command.hpp"

#include <boost/program_options.hpp>

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>
#include <iostream>

#include "kiln/config/config.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/run_dir.hpp"
#include "kiln/launch/rendezvous_dir.hpp"
#include "kiln/launch/supervisor.hpp"
#include "kiln/train/collective_recorder.hpp"
#include "kiln/train/collective_report.hpp"
#include "kiln/train/core_tables.hpp"
#include "kiln/train/run.hpp"

namespace kiln::cli {
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

/// `args` without every "--NAME VALUE" and "--NAME=VALUE".
std::vector<std::string> without_option(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out;
  const std::string flag = "--" + name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag) {
      ++i;  // and its value
    } else if (args[i].rfind(flag + "=", 0) != 0) {
      out.push_back(args[i]);
    }
  }
  return out;
}

/// After a failed job: which rank the others waited for, from the records the ranks wrote
/// (collective_report.hpp). Silent when no rank wrote one (the job failed before training), and
/// after Ctrl-C on a job that was not hung (no rank had waited a second in a collective): the
/// ranks were merely caught at different points of a step.
void explain_collectives(const fs::path& run_dir, std::int64_t job_started_ms, bool interrupted) {
  train::TraceSet set;
  try {
    set = train::read_traces(run_dir / "debug", job_started_ms);
  } catch (const Error&) {
    return;
  }
  if (interrupted && train::longest_wait_ms(set) < 1000) return;
  std::cerr << "kiln: collectives: " << train::verdict(set) << "\n"
            << "kiln: each rank's latest collectives: kiln collectives --run-dir " << run_dir.string() << std::endl;
}

constexpr int kMaxNproc = 1024;
constexpr int kMinNprocLimit = 16;  // so a small machine can still run the usual 2-8 rank tests

int run_supervised(const std::vector<std::string>& args, int nproc, const std::string& config,
                   const std::vector<std::string>& sets, std::string run_dir, io::RunDirMode mode) {
  if (nproc < 1) throw ConfigError(fmt::format("--nproc {} must be at least 1", nproc));
  // Every rank is a process with its own model, buffers and threads: far more of them than cores
  // only thrashes, and a typo (--nproc 100000) would fork until the machine stops responding.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int max_nproc = std::min(kMaxNproc, std::max(kMinNprocLimit, 4 * cores));
  if (nproc > max_nproc) {
    throw ConfigError(fmt::format("--nproc {} is more local ranks than this machine can run: at most {} (4 x its {} "
                                  "cores, at least {}, never more than {}); use fewer ranks, or start ranks on "
                                  "several machines with --rank/--world-size",
                                  nproc, max_nproc, cores, kMinNprocLimit, kMaxNproc));
  }
  // Only [run] and [dist] are read here; the ranks validate the whole config themselves.
  config::Config cfg = config::Config::load(config, sets);
  if (run_dir.empty()) run_dir = cfg.validate("run", train::run_schema()).get_string("run_dir");
  // A rank stopped for longer than a collective may take fails the job, naming it (supervisor.hpp).
  const double timeout_s = cfg.validate("dist", train::dist_schema()).get_float("timeout_s");
  // Only chosen here (a timestamped default must be the same for every rank): the ranks create
  // it once they have checked the config and their plugins and met, so a start that fails
  // leaves nothing behind (run.hpp).
  const fs::path dir = fs::absolute(io::plan_run_dir(run_dir, mode));
  launch::RendezvousDir rendezvous;  // also removes those left by killed supervisors

  launch::SuperviseOptions o;
  o.program = fs::read_symlink("/proc/self/exe");
  o.args = {"train"};
  for (const auto& a : without_option(without_option(args, "nproc"), "run-dir")) o.args.push_back(a);
  o.args.push_back("--run-dir");
  o.args.push_back(dir.string());
  o.nproc = nproc;
  o.rendezvous = "file:" + rendezvous.path().string();
  if (timeout_s > 0 && timeout_s <= 604800) o.stall_limit = std::chrono::milliseconds(std::llround(timeout_s * 1000));
  const std::int64_t started_ms = train::wall_clock_ms();
  const launch::SuperviseOutcome outcome = launch::supervise(o);
  if (outcome.exit_code != 0) {
    std::cerr << "kiln: error: " << outcome.message << std::endl;
    explain_collectives(dir, started_ms, outcome.exit_code != 1);
  }
  return outcome.exit_code;
}

}  // namespace

int run_train_command(const std::vector<std::string>& args) {
  po::options_description opts("kiln train options");
  std::string config;
  std::vector<std::string> sets, plugin_paths;
  std::string run_dir, dump_params, resume;
  int rank = -1, world = -1, nproc = 0;
  std::int64_t profile_warmup = 1;
  opts.add_options()
      ("help,h", "show this help")
      ("config,c", po::value(&config)->required(), "TOML file describing the run")
      ("set,s", po::value(&sets)->composing(), "override a config key: --set optimizer.lr=0.01 (repeatable)")
      ("run-dir", po::value(&run_dir), "output directory (default: run.run_dir or runs/<timestamp>)")
      ("plugin-path", po::value(&plugin_paths)->composing(), "extra plugin directory, searched first (repeatable)")
      ("nproc", po::value(&nproc), "start N local ranks and supervise them (like torchrun --nproc-per-node)")
      ("rank", po::value(&rank), "this process's rank (with --world-size; overrides launcher variables)")
      ("world-size", po::value(&world), "number of ranks (with --rank)")
      ("resume", po::value(&resume),
       "continue the run in --run-dir from its newest checkpoint (auto) or from a checkpoint directory")
      ("resume-ignore-config",
       "resume even if the checkpoint's run differs from this config (model, seed, batch, world size, data, precision)")
      ("dump-params", po::value(&dump_params), "after training, rank 0 writes the parameters here as raw f32")
      ("log-all-ranks", "every rank prints its log lines on the console, not only rank 0 (sets log.all_ranks)")
      ("check-sharding", "before training, check that every sample is read by exactly one rank in the first two "
                         "epochs and that the order changes (docs/distributed.md)")
      ("profile", "time every backend op of the training steps; print a per-op table at the end (docs/profiling.md)")
      ("profile-warmup", po::value(&profile_warmup), "steps not profiled first (default 1: plans are made then)");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: kiln train --config FILE [--set key=value]... [--run-dir DIR] [--nproc N]\n\n" << opts << "\n";
    return 0;
  }
  po::notify(vm);

  if (vm.count("nproc")) {
    if (vm.count("rank") || vm.count("world-size")) {
      throw po::error("--nproc starts its own ranks; it cannot be combined with --rank/--world-size");
    }
    return run_supervised(args, nproc, config, sets, run_dir,
                          resume.empty() ? io::RunDirMode::fresh : io::RunDirMode::resume);
  }

  train::TrainCommand cmd;
  cmd.config = config;
  cmd.overrides = sets;
  if (vm.count("log-all-ranks")) cmd.overrides.push_back("log.all_ranks=true");
  cmd.run_dir = run_dir;
  cmd.dump_params = dump_params;
  cmd.resume = resume;
  cmd.resume_ignore_config = vm.count("resume-ignore-config") > 0;
  cmd.profile = vm.count("profile") > 0;
  cmd.check_sharding = vm.count("check-sharding") > 0;
  if (profile_warmup < 0) throw po::error("--profile-warmup must be >= 0");
  cmd.profile_warmup = profile_warmup;
  for (const auto& p : plugin_paths) cmd.plugin_dirs.emplace_back(p);
  if (vm.count("rank")) cmd.ranks.rank = rank;
  if (vm.count("world-size")) cmd.ranks.world_size = world;
  train::run_training(cmd);
  return 0;
}

}  // namespace kiln::cli
